"""The registry of reproducible experiments, in paper order (plain data: no PyTorch)."""

from __future__ import annotations

from fedcluster.reproduce import (
    specs_cflgp,
    specs_fedmd,
    specs_fedrc,
    specs_fedrc_pfl,
    specs_fedrc_streams,
    specs_fedrc_tables,
    specs_hcfl,
)
from fedcluster.reproduce.spec import Experiment, Unavailable

EXPERIMENTS: dict[str, Experiment] = {e.name: e for mod in (specs_fedrc, specs_hcfl, specs_fedmd, specs_cflgp)
                                      for e in mod.EXPERIMENTS}
EXPERIMENTS.update((e.name, e) for mod in (specs_fedrc_tables, specs_fedrc_pfl, specs_fedrc_streams)
                   for e in mod.EXPERIMENTS)
# paper results that cannot run here, listed with what they need
UNAVAILABLE: dict[str, Unavailable] = {u.name: u for u in specs_fedrc_tables.UNAVAILABLE}


def get(name: str) -> Experiment:
    """The experiment called ``name``; a KeyError naming the valid choices otherwise."""
    if name in UNAVAILABLE:
        raise KeyError(f"{name} cannot run here: {UNAVAILABLE[name].needs}")
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; `fedcluster reproduce --list` shows: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]
