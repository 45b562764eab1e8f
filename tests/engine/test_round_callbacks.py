"""engine.callbacks: the round loop hands every round to its callbacks in order (the divergence watch, the run
directory's rows, tracking, progress, checkpoints), and a resumed run starts them from its checkpoint."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.callbacks import RoundCallback, RoundEnd
from fedcluster.engine.runner import Run
from fedcluster.tracking.resume import plan_resume


class Recorder(RoundCallback):
    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.events, self.checkpointed = run_dir, [], []

    def on_start(self, first: int, rows: list[dict[str, Any]]) -> None:
        self.events.append(("start", first, len(rows)))

    def on_played(self, round_: int, metrics: dict[str, float]) -> None:
        self.events.append(("played", round_, bool(metrics)))

    def on_round(self, end: RoundEnd) -> None:
        with open(self.run_dir / "rounds.csv") as f:  # the row is written before the callbacks after it
            written = [int(r["round"]) for r in csv.DictReader(f)]
        self.events.append(("round", end.round, written[-1], len(end.rows), end.last))

    def on_finish(self) -> None:
        self.events.append(("finish",))


class RecordedRun(Run):
    def callbacks(self) -> list[RoundCallback]:
        self.recorder = Recorder(self.dir.path)
        built = super().callbacks()
        return [*built[:2], self.recorder, *built[2:]]


def test_each_round_reaches_the_callbacks_after_its_row_is_written(tmp_path: Path) -> None:
    cfg, typed = resolve(load_raw(None, ["num_clients=6", "rounds=3", "eval_every=2", "checkpoint_every=2",
                                         "progress=false", f"out={tmp_path}"]))
    run = RecordedRun(cfg, typed)
    run.execute()
    assert run.recorder.events == [
        ("start", 0, 0),
        ("played", 1, False), ("round", 1, 1, 1, False),
        ("played", 2, True), ("round", 2, 2, 2, False),
        ("played", 3, True), ("round", 3, 3, 3, True),
        ("finish",),
    ]
    assert run.checkpoints.last == 3  # every 2 rounds and after the last


def test_a_resumed_run_starts_its_callbacks_at_the_checkpoint(tmp_path: Path) -> None:
    cfg, typed = resolve(load_raw(None, ["num_clients=6", "rounds=2", "progress=false", f"out={tmp_path}"]))
    Run(cfg, typed).execute()
    plan = plan_resume(tmp_path, ["rounds=3"])
    run = RecordedRun(plan.cfg, plan.typed, resume=True, run_dir=plan.run_dir)
    run.execute()
    assert run.recorder.events == [("start", 2, 2), ("played", 3, True), ("round", 3, 3, 3, True), ("finish",)]


class CheckpointSeen(RoundCallback):
    """A user's callback: notes each round and whether the round's checkpoint was already on disk."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.rounds = run_dir, []

    def on_round(self, end: RoundEnd) -> None:
        self.rounds.append((end.round, (self.run_dir / "checkpoint.pt").is_file(), end.row["round"]))


def test_a_user_passes_callbacks_through_fedcluster_run(tmp_path: Path) -> None:
    import fedcluster

    seen = CheckpointSeen(tmp_path)
    fedcluster.run(None, callbacks=[seen], num_clients=6, rounds=2, checkpoint_every=1, progress=False,
                   out=str(tmp_path))
    assert seen.rounds == [(1, True, 1), (2, True, 2)]  # after the run's own callbacks: the checkpoint is written


def test_callbacks_that_are_not_round_callbacks_are_refused_in_one_line(tmp_path: Path) -> None:
    import pytest

    import fedcluster
    from fedcluster.errors import ConfigError

    with pytest.raises(ConfigError, match="callbacks= takes RoundCallback objects.*got function"):
        fedcluster.run(None, callbacks=[lambda end: None], num_clients=6, rounds=1, progress=False,
                       out=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()
