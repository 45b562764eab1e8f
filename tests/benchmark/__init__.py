"""Tests of fedcluster.benchmark: the `fedcluster benchmark` command and its page."""
