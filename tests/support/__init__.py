"""Helpers shared by the tests (not tests themselves): the simulated device, method runs, child processes and the
Flower harnesses."""
