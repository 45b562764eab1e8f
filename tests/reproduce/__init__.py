"""Tests of fedcluster.reproduce: `fedcluster reproduce`, its experiments, run store, queue and pages."""
