"""Tests of fedcluster.config: parsing, validation, bounds, ranges and the shipped configs."""
