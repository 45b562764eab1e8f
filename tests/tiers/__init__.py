"""Tests of fedcluster.tiers: the tier parts the clustered methods are built from."""
