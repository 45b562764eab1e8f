"""Behaviour tests' shared step: a configured method played for some rounds without evaluation (the clustering or
the models are what such tests check)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.common import full_test
from fedcluster.data.sources.digits import load_digits
from fedcluster.engine.runner import Run


def played(out: Path, overrides: list[str], rounds: int, config: Path | None = None,
           fed: Federation | None = None) -> Run:
    """``rounds`` rounds of the run ``overrides`` (and ``config``) name, its run folder under ``out``."""
    cfg, typed = resolve(load_raw(None if config is None else str(config),
                                  [*overrides, f"rounds={rounds}", f"out={out / 'run'}"]))
    run = Run(cfg, typed, fed=fed)
    try:
        for t in range(rounds):
            run.play_round(t)
    finally:
        run.dir.release()
    return run


def label_groups(seed: int, groups: tuple[tuple[int, ...], ...], per_group: int = 4) -> Federation:
    """A digits federation where each group of ``per_group`` clients holds its own digits (disjoint label sets)."""
    d, rng = load_digits(), np.random.default_rng(seed)
    plans = []
    for g, classes in enumerate(groups):
        rows = rng.permutation(np.flatnonzero(np.isin(d.y_train, classes)))
        plans += [ClientPlan(np.sort(part), concept=g) for part in np.array_split(rows, per_group)]
    return assemble(d, plans, [full_test(d)], 0.2, rng, {"name": "label-groups", "dataset": "digits"})
