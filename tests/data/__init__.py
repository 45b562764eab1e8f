"""Tests of fedcluster.data: sources, scenarios, shifts and the federation cache."""
