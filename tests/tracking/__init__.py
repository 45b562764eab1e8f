"""Tests of fedcluster.tracking: run directories' pictures, compare, and the experiment trackers."""
