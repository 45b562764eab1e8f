"""The registry of reproducible experiments, in paper order (plain data: no PyTorch)."""

from __future__ import annotations

from fedcluster.reproduce import specs_s1, specs_s2, specs_s3, specs_s4
from fedcluster.reproduce.spec import Experiment

EXPERIMENTS: dict[str, Experiment] = {e.name: e for mod in (specs_s4, specs_s1, specs_s2, specs_s3)
                                      for e in mod.EXPERIMENTS}


def get(name: str) -> Experiment:
    """The experiment called ``name``; a KeyError naming the valid choices otherwise."""
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; `fedcluster reproduce --list` shows: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]
