"""Behaviour tests' shared step: a configured method played for some rounds without evaluation (the clustering or
the models are what such tests check)."""

from __future__ import annotations

from pathlib import Path

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.federation import Federation
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
