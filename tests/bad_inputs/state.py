"""Crafted state of every registered method: a finished run's checkpoint with one saved field replaced by a value
its declared kind refuses (tests/bad_inputs/crafted_state.py), rewritten with a valid checksum, then resumed. The
methods and their fields are read from the registry and the runs, so a new method is tried here too."""

from __future__ import annotations

import atexit
import io
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run
from fedcluster.storage.state_file import load_state, save_state
from tests.bad_inputs.core import Case
from tests.bad_inputs.crafted_state import crafts

REGRESSION = ["scenario=mixed-regression", "dataset=mixed-regression", "model=linear-nobias"]
SETTINGS = {"fedmd": [*REGRESSION, "algorithm.num_clusters=3", "algorithm.phase1_rounds=1"],
            "flhc": ["algorithm.cluster_round=1"]}
ROUNDS = 2
_ROOT: list[Path] = []


def _finished(name: str) -> tuple[Path, dict[str, Any]]:
    """A finished run of method ``name`` (made once) and the kinds of its saved fields."""
    if not _ROOT:
        _ROOT.append(Path(tempfile.mkdtemp(prefix="bad-inputs-state-")))
        atexit.register(shutil.rmtree, _ROOT[0], True)
    out = _ROOT[0] / name
    cfg, typed = resolve(load_raw(None, [f"algorithm={name}", *SETTINGS.get(name, []), "num_clients=6",
                                         f"rounds={ROUNDS}", "progress=false", "threads=1", f"out={out}"]))
    with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        run = Run(cfg, typed)
        run.execute()
    return out, run.alg.saved_kinds()


def _crafted(source: Path, field: str, bad: Any) -> Any:
    def setup(d: Path) -> None:
        run = d / "run"
        shutil.copytree(source, run)
        for lock in run.glob("*.lock"):
            lock.unlink()
        state = load_state(run / "checkpoint.pt", "checkpoint")
        state["algorithm"][field] = bad
        save_state(run / "checkpoint.pt", state, "checkpoint")
    return setup


def state_cases() -> list[Case]:
    cases: list[Case] = []
    for name in ALGORITHMS.names():
        source, kinds = _finished(name)
        saved = load_state(source / "checkpoint.pt", "checkpoint")["algorithm"]
        for field, value in saved.items():
            for label, bad in crafts(kinds[field], value, ROUNDS)[:3]:
                cases.append(Case("crafted state", f"{name} {field}: {label}",
                                  lambda d: ["resume", str(d / "run"), f"rounds={ROUNDS + 1}", "progress=false"],
                                  _crafted(source, field, bad)))
    return cases
