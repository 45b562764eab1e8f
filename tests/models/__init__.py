"""Tests of fedcluster.models: the model zoo."""
