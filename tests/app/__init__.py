"""Tests of fedcluster.app: the library API, the command line, sweeps and the generated pages."""
