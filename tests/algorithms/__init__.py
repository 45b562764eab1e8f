"""Tests of fedcluster.algorithms: each method against what its paper says it does."""
