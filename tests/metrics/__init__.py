"""Tests of fedcluster.metrics."""
