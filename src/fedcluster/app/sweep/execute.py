"""Running a sweep's points: each an ordinary ``fedcluster run`` (or ``resume``) in its own process.

A point's folder ``SWEEP/NAME`` is an ordinary run directory. On a rerun a finished point (``summary.json``) is
skipped, an interrupted one (``checkpoint.pt`` without a summary) continues through ``fedcluster resume``, a
point that diverged earlier is not run again (delete its folder to retry), and the rest start. A folder that
holds a run with other settings is refused before anything runs. ``workers`` points run at once (a thread per
worker waits on its ``fedcluster`` process); each run's output goes to ``SWEEP/logs/NAME.log``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedcluster.app.sweep.grid import Point
from fedcluster.config.validation import read_config_file
from fedcluster.errors import UserError
from fedcluster.storage.atomic import atomic_write
from fedcluster.tracking.run_files import RunFileError, parse_summary

STATE_FILE = "sweep.json"
LOGS = "logs"
EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 3, 130
# keys that do not change what a run computes: a finished run with other values still counts
NOT_COMPARED = frozenset({"out", "progress", "threads", "workers", "checkpoint_every", "tracking", "tracking_uri",
                          "tracking_experiment", "tensorboard_dir"})


@dataclass
class Outcome:
    name: str
    status: str  # finished, skipped, diverged, failed, interrupted, refused
    seconds: float = 0.0
    note: str = ""
    rc: int = 0


@dataclass
class SweepState:
    """``SWEEP/sweep.json``: how the sweep was asked for and which points diverged (written by this process)."""

    folder: Path
    data: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, folder: Path) -> SweepState:
        path = folder / STATE_FILE
        if not path.is_file():
            return cls(folder)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            raise UserError(f"{path} is damaged or not a fedcluster sweep file; delete it (the runs stay) or pass "
                            "another --out") from None
        if not isinstance(data, dict):
            raise UserError(f"{path} is not a fedcluster sweep file; pass another --out")
        return cls(folder, data)

    def diverged(self) -> set[str]:
        return set(self.data.get("diverged", []))

    def mark(self, name: str, diverged: bool) -> None:
        with self.lock:
            names = self.diverged() | {name} if diverged else self.diverged() - {name}
            self.data["diverged"] = sorted(names)
            self.save()

    def save(self) -> None:
        atomic_write(self.folder / STATE_FILE, (json.dumps(self.data, indent=1) + "\n").encode(),
                     "free some space, then run the sweep again")


def finished(run_dir: Path) -> bool:
    try:
        return parse_summary(run_dir / "summary.json") is not None
    except RunFileError:
        return False


def check_same_settings(point: Point, run_dir: Path) -> None:
    """Refuse a folder whose run was made with other settings than the point's (before anything runs)."""
    if not (run_dir / "config.yaml").is_file():
        return
    try:
        stored = read_config_file(run_dir / "config.yaml")
    except UserError as e:
        raise UserError(f"{run_dir}: {e}") from None
    wanted = point.config.to_dict()
    for key, value in wanted.items():
        if key in NOT_COMPARED or stored.get(key) == value:
            continue
        raise UserError(f"{run_dir} holds a run with {key}={json.dumps(stored.get(key))}, but this sweep's point "
                        f"has {key}={json.dumps(value)}; pass another --out, or delete that folder to run it anew")


def command(point: Point, run_dir: Path, config: str | None, threads: int | None) -> list[str]:
    """The ``fedcluster`` command of a point: resume an interrupted run, else run it."""
    extra = ["progress=false"] + ([f"threads={threads}"] if threads else [])
    if (run_dir / "checkpoint.pt").is_file():
        return [sys.executable, "-m", "fedcluster", "resume", str(run_dir), *extra]
    return [sys.executable, "-m", "fedcluster", "run", *([config] if config else []), *point.overrides,
            f"out={run_dir}", *extra]


class Runner:
    """Runs the points that are not finished, ``workers`` at a time, reporting each as it ends."""

    def __init__(self, folder: Path, config: str | None, state: SweepState, workers: int,
                 threads: int | None) -> None:
        self.folder, self.config, self.state = folder, config, state
        self.workers, self.threads = workers, threads
        self.stop = threading.Event()
        self.done = 0

    def run_all(self, points: list[Point]) -> list[Outcome]:
        outcomes = []
        todo = []
        for p in points:
            if finished(self.folder / p.name):
                outcomes.append(Outcome(p.name, "skipped", note="finished earlier"))
            elif p.name in self.state.diverged():
                outcomes.append(Outcome(p.name, "diverged", note="diverged earlier; delete its folder to run it again"))
            else:
                todo.append(p)
        resumed = sum((self.folder / p.name / "checkpoint.pt").is_file() for p in todo)
        print(f"sweep: {len(points)} runs in {self.folder}: {len(points) - len(todo)} done earlier, {resumed} to "
              f"resume, {len(todo) - resumed} to start; {self.workers} at a time", file=sys.stderr)
        (self.folder / LOGS).mkdir(exist_ok=True)
        self.total = len(todo)
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures: set[Future[Outcome]] = {pool.submit(self.run_one, p) for p in todo}
            try:
                while futures:
                    finished_now, futures = wait(futures, return_when=FIRST_COMPLETED)
                    outcomes += [f.result() for f in finished_now]
            except KeyboardInterrupt:  # Ctrl-C reached every run too: each keeps its checkpoint
                self.stop.set()
                for f in futures:
                    f.cancel()
                outcomes += [f.result() for f in futures if not f.cancelled()]
                outcomes.append(Outcome("", "interrupted"))
        return outcomes

    def run_one(self, point: Point) -> Outcome:
        if self.stop.is_set():
            return Outcome(point.name, "interrupted")
        run_dir = self.folder / point.name
        log = self.folder / LOGS / f"{point.name}.log"
        started = time.perf_counter()
        with log.open("a", encoding="utf-8") as out:
            out.write(f"$ {' '.join(command(point, run_dir, self.config, self.threads))}\n")
            out.flush()
            rc = subprocess.run(command(point, run_dir, self.config, self.threads), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=os.environ.copy()).returncode
        seconds = time.perf_counter() - started
        outcome = self._outcome(point, rc, seconds, log)
        if outcome.status == "failed" and rc == EXIT_USAGE:
            self.stop.set()  # a refused run (missing data, full disk) would be refused again at every point
        self.done += 1
        print(f"[{self.done}/{self.total}] {point.name}: {outcome.status}"
              f"{' (' + outcome.note + ')' if outcome.note else ''}", file=sys.stderr)
        return outcome

    def _outcome(self, point: Point, rc: int, seconds: float, log: Path) -> Outcome:
        if rc == 0 and not finished(self.folder / point.name):  # stopped after its last checkpoint, before its summary
            return Outcome(point.name, "failed", seconds, f"ended without a summary.json: {last_error(log)}", 1)
        if rc == 0:
            self.state.mark(point.name, diverged=False)
            summary = parse_summary(self.folder / point.name / "summary.json") or {}
            val = summary.get("final", {}).get("val_acc")
            note = f"final val_acc {val:.4f}, " if isinstance(val, float) else ""
            return Outcome(point.name, "finished", seconds, f"{note}{seconds:.0f}s")
        if rc == EXIT_DIVERGED:
            self.state.mark(point.name, diverged=True)
            return Outcome(point.name, "diverged", seconds, f"see {log}")
        if rc in (EXIT_INTERRUPTED, -2):
            return Outcome(point.name, "interrupted", seconds, "resumes from its checkpoint on a rerun")
        return Outcome(point.name, "failed", seconds, f"exit {rc}: {last_error(log)}", rc)


def last_error(log: Path) -> str:
    """The last ``error`` line of a run's log (what ``fedcluster`` said), else the last line."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
    except OSError:
        return f"see {log}"
    errors = [line for line in lines if "error" in line.lower()]
    return ((errors or lines or [""])[-1])[:300] + f" (see {log})"
