"""The Algorithm protocol every method implements (:mod:`fedcluster.engine.algorithm`, where the runner that
drives it finds it), under its historical name."""

from fedcluster.engine.algorithm import Algorithm, Context, RoundResult

__all__ = ["Algorithm", "Context", "RoundResult"]
