"""The old home of the in-process trainer and its loss, kept for the modules that still import them from here:
the trainer is :mod:`fedcluster.engine.backends.local`'s, the kernels and losses :mod:`fedcluster.engine.kernels`'."""

from fedcluster.engine.backends.local import Trainer
from fedcluster.engine.kernels import LossFn, per_sample_loss

__all__ = ["LossFn", "Trainer", "per_sample_loss"]
