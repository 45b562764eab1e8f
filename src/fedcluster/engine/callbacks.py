"""The round loop's callbacks: what a run does around its rounds (the run directory's rows, tracking, progress;
checkpoints in :mod:`fedcluster.engine.checkpointing`, the divergence watch in :mod:`fedcluster.engine.divergence`).

The loop (:meth:`fedcluster.engine.runner.Run.execute`) plays each round, evaluates it when due and hands the
round to its callbacks, in their order: :meth:`RoundCallback.on_played` first (a check that may stop the run before
the round's row is kept), then :meth:`RoundCallback.on_round` with the row, Ctrl-C held so that a round's files are
all written or none.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from fedcluster.engine.protocol import RoundResult
from fedcluster.tracking.run_dir import RunDir

Row = dict[str, Any]


@dataclass
class RoundEnd:
    """A finished round as the callbacks see it."""

    round: int  # rounds done, this one included (1-based)
    row: Row  # its rounds.csv row
    result: RoundResult  # what the method reported (clusters.jsonl's record, bytes)
    metrics: dict[str, float]  # the evaluation's metrics; {} when the round was not evaluated
    rows: list[Row]  # every row of the run so far, this one last
    elapsed: float  # seconds of rounds so far, resumed sessions included
    last: bool  # the run's last round


class RoundCallback:
    """Hooks of the round loop; each does nothing unless a callback overrides it."""

    def on_start(self, first: int, rows: list[Row]) -> None:
        """Before round ``first`` (0, or the round a resumed run continues from; ``rows``: the rows kept)."""

    def on_played(self, round_: int, metrics: dict[str, float]) -> None:
        """Round ``round_`` played (and evaluated when ``metrics``); raising here stops the run before its row."""

    def on_round(self, end: RoundEnd) -> None:
        """The round's row (Ctrl-C held)."""

    def on_finish(self) -> None:
        """After the last round, or when the run stops early."""


class Callbacks(RoundCallback):
    """Several callbacks called in order."""

    def __init__(self, callbacks: list[RoundCallback]) -> None:
        self.callbacks = callbacks

    def on_start(self, first: int, rows: list[Row]) -> None:
        for c in self.callbacks:
            c.on_start(first, rows)

    def on_played(self, round_: int, metrics: dict[str, float]) -> None:
        for c in self.callbacks:
            c.on_played(round_, metrics)

    def on_round(self, end: RoundEnd) -> None:
        for c in self.callbacks:
            c.on_round(end)

    def on_finish(self) -> None:
        for c in self.callbacks:
            c.on_finish()


class RoundFiles(RoundCallback):
    """Each round's row in rounds.csv and its clusters record in clusters.jsonl, as soon as it is known."""

    def __init__(self, run_dir: RunDir) -> None:
        self.dir = run_dir

    def on_round(self, end: RoundEnd) -> None:
        self.dir.append_round(end.row)
        if end.result.clusters is not None:
            self.dir.append_jsonl("clusters.jsonl", {"round": end.round, **end.result.clusters})


class Tracking(RoundCallback):
    """The rows to the run's trackers (``tracking=``: TensorBoard, W&B, ...; :mod:`fedcluster.tracking.loggers`)."""

    def __init__(self, trackers: Any) -> None:
        self.trackers = trackers

    def on_start(self, first: int, rows: list[Row]) -> None:
        self.trackers.start(rows)

    def on_round(self, end: RoundEnd) -> None:
        self.trackers.log_round(end.row)


class Announce(RoundCallback):
    """A text on stderr once the trackers have started (the federation's summary: a tracker that cannot start
    is said first, not after it)."""

    def __init__(self, text: str | None) -> None:
        self.text = text

    def on_start(self, first: int, rows: list[Row]) -> None:
        if self.text:
            print(self.text, file=sys.stderr, flush=True)


class Progress(RoundCallback):
    """A progress bar on stderr (``progress=false``: none) with the last evaluation's accuracies and K."""

    def __init__(self, label: str, rounds: int, enabled: bool) -> None:
        self.label, self.rounds, self.enabled = label, rounds, enabled
        self.bar: tqdm | None = None

    def on_start(self, first: int, rows: list[Row]) -> None:
        self.bar = tqdm(total=self.rounds, initial=first, disable=not self.enabled, file=sys.stderr,
                        desc=self.label, unit="round", dynamic_ncols=True)

    def on_round(self, end: RoundEnd) -> None:
        assert self.bar is not None, "on_start first"
        if end.metrics:
            self.bar.set_postfix(val=f"{end.metrics['val_acc']:.3f}", test=f"{end.metrics['test_acc']:.3f}",
                                 K=end.row["num_clusters"], refresh=False)
        self.bar.update(1)

    def on_finish(self) -> None:
        if self.bar is not None:
            self.bar.close()
