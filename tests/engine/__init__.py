"""Tests of fedcluster.engine: training paths, devices, memory, evaluation, distributed runs and faults."""
