"""Tests of fedcluster.flower: the Flower apps, nodes, simulation and deployment."""
