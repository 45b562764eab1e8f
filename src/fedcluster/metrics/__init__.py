"""Scores computed from a run's numbers: clustering against the ground truth (clustering), the regression
papers' estimation errors (regression) and mean ± sd over seeds (statistics)."""
