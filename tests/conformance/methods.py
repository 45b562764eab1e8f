"""The methods the conformance suite checks, found from the registry, and how it plays them.

Every name ``ALGORITHMS`` knows when the tests are collected is checked, built-in or registered by a plugin (a
module imported before collection, e.g. ``pytest -p my_plugin``): a new method needs no line here. A method that
cannot show its behaviour on the tiny federation with its defaults gets its keys from :data:`SETTINGS`, one row
with the reason.
"""

from __future__ import annotations

import csv
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.callbacks import RoundCallback, RoundEnd
from fedcluster.engine.checkpointing import check_state
from fedcluster.engine.protocol import RoundResult
from fedcluster.engine.runner import Run
from fedcluster.engine.transfer import state_to_device
from fedcluster.storage.state_file import load_state
from fedcluster.tracking.checkpoint_schema import CheckpointSchemaError
from tests.bad_inputs.crafted_state import crafts

ROUNDS = 2
# 6 clients, a 16-unit MLP, 2 rounds, a checkpoint every round; the vectorised engine is what engine=auto picks on
# an accelerator, so the same runs serve the strict-device check
TINY = ["num_clients=6", f"rounds={ROUNDS}", "progress=false", "threads=1", "model.hidden=[16]", "checkpoint_every=1",
        "engine=vectorized"]

# name -> (keys beyond TINY, why the defaults do not do on the tiny federation). Keep it small.
SETTINGS: dict[str, tuple[list[str], str]] = {
    "fedmd": (["algorithm.delta=1.0", "algorithm.init=random"],
              "the demo federation has no θ* to take Δ from, and the moment start reads every sample on the server "
              "(refused on ranks)"),
    "flhc": (["algorithm.cluster_round=1"], "clusters after round 1, so that 2 rounds reach its clustered state"),
}


def names() -> list[str]:
    """Every registered method, at collection time."""
    return ALGORITHMS.names()


def own_keys(name: str) -> list[str]:
    """The keys :data:`SETTINGS` gives the method (none for most)."""
    return SETTINGS.get(name, ([], ""))[0]


def arguments(name: str) -> list[str]:
    """The key=value arguments of the method's conformance run (without ``out=``)."""
    return [*TINY, f"algorithm={name}", *own_keys(name)]


def rows(out: Path, name: str = "rounds.csv") -> list[dict[str, str]]:
    with (out / name).open() as f:
        return list(csv.DictReader(f))


TIMES = {"seconds", "wall_seconds", "git_revision", "run_dir"}  # what differs between two runs of the same numbers


def run_files(out: Path) -> dict[str, Any]:
    """The run directory's files as data, without their time (or place) columns."""
    summary = json.loads((out / "summary.json").read_text())
    return {"rounds.csv": [{k: v for k, v in r.items() if k not in TIMES} for r in rows(out)],
            "clients.csv": rows(out, "clients.csv"),
            "clusters.jsonl": [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]
            if (out / "clusters.jsonl").is_file() else None,  # written by methods that report their clusters
            "summary.json": {k: v for k, v in summary.items() if k not in TIMES}}


def checkpoint(out: Path) -> dict[str, Any]:
    return load_state(out / "checkpoint.pt", "checkpoint")


@dataclass
class Played:
    """A method's conformance run: ``out`` finished after :data:`ROUNDS` rounds; ``after_one`` the copy of its run
    directory after round 1 (its checkpoint of round 1); each round's result, cohort and K before and after."""

    name: str
    run: Run
    out: Path
    after_one: Path
    results: list[RoundResult] = field(default_factory=list)
    cohorts: list[np.ndarray] = field(default_factory=list)
    clusters: list[tuple[int, int]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)  # the method's saved state at the end, on the CPU


class Recorder(RoundCallback):
    def __init__(self, played: Played) -> None:
        self.played, self.k = played, played.run.alg.num_clusters

    def on_round(self, end: RoundEnd) -> None:
        p = self.played
        p.results.append(end.result)
        p.cohorts.append(np.asarray(p.run.stream[end.round - 1]))
        p.clusters.append((self.k, p.run.alg.num_clusters))
        self.k = p.run.alg.num_clusters
        if end.round == 1:  # the checkpoint of round 1 is written by now (the run's callbacks come first)
            shutil.copytree(p.out, p.after_one)


def play(name: str, root: Path) -> Played:
    """The method's conformance run under ``root`` (one interpreter thread: tiny models)."""
    out = root / "run"
    cfg, typed = resolve(load_raw(None, [*arguments(name), f"out={out}"]))
    threads = torch.get_num_threads()
    try:
        run = Run(cfg, typed)
        played = Played(name, run, out, root / "after-one")
        run.user_callbacks.append(Recorder(played))
        run.execute()
    finally:
        torch.set_num_threads(threads)
    played.state = state_to_device(run.alg.state_dict(), torch.device("cpu"))
    return played


def refuses_crafted_values(run: Run, state: dict[str, Any], rounds: int) -> None:
    """Every saved field of ``state`` (the method's saved state after ``rounds`` rounds) has a declared kind, the
    state as written passes the resume check, and each value a hand-edited checkpoint with a valid checksum could
    hold against the field's kind (tests/bad_inputs/crafted_state.py) is refused in one line naming the field."""
    declared = run.alg.saved_kinds()
    assert set(state) == set(run.alg.saved_fields()) <= set(declared), "a saved field without a declared kind"

    def check(s: dict[str, Any]) -> None:
        check_state(run.alg, s, rounds, run.ctx.module, run.fed, "checkpoint.pt")

    check(state)
    tried = 0
    for name in state:
        for label, bad in crafts(declared[name], state[name], rounds):
            try:
                check({**state, name: bad})
            except CheckpointSchemaError as refused:
                line = str(refused)
                assert "\n" not in line and f"algorithm.{name}" in line, (name, label, line)
            else:
                raise AssertionError(f"algorithm.{name} {label}: a crafted value passed the resume check")
            tried += 1
    assert tried >= 2 * len(state), tried
