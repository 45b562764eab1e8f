"""Running a sweep's points: each an ordinary ``fedcluster run`` (or ``resume``), in a few long-lived worker
processes (:mod:`.workers`) rather than a new process per point.

A point's folder ``SWEEP/NAME`` is an ordinary run directory. On a rerun a finished point (``summary.json``) is
skipped, or extended through ``fedcluster resume ... rounds=N`` when the sweep now asks for more rounds; an
interrupted one (``checkpoint.pt`` without a summary) continues through ``fedcluster resume``, a point that
diverged earlier is not run again (delete its folder to retry), and the rest start. A folder that holds a run with
other settings is refused before anything runs. ``workers`` points run at once; each run's output goes to
``SWEEP/logs/NAME.log``. A refused run (exit status 2: missing data, a full disk) would be refused at every point:
no further point starts.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tqdm import tqdm

from fedcluster.app.sweep.grid import SAFE_NAME, Point
from fedcluster.app.sweep.workers import Pool, Task
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
CLI = "fedcluster.app.cli:main"  # what a worker runs each point with (by name: the command line imports this module)
EXTENDABLE = "rounds"  # a finished run with fewer rounds is extended in place (``fedcluster resume``)


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
        """The folder's sweep.json, checked: anything but what a sweep writes is refused in one line."""
        path = folder / STATE_FILE
        if not path.is_file():
            return cls(folder)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            raise UserError(f"{path} is damaged or not a fedcluster sweep file; delete it (the runs stay) or pass "
                            "another --out") from None
        problem = state_problem(data)
        if problem:
            raise UserError(f"{path} is not a sweep file fedcluster wrote ({problem}); delete it (the runs stay) or "
                            "pass another --out")
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


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _point_problem(p: Any) -> str | None:
    if not isinstance(p, dict):
        return "a point is not an object"
    name = p.get("name")
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or name in (".", ".."):
        return f"a point's name {json.dumps(name)[:80]} is not a folder name a sweep makes"
    setting = p.get("setting")
    if not isinstance(setting, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in setting.items()):
        return f"the point {name} has no setting of key=value texts"
    if not isinstance(p.get("algorithm"), str):
        return f"the point {name} names no algorithm"
    seed = p.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        return f"the point {name} has a seed that is not a whole number"
    return None


def state_problem(data: Any) -> str | None:
    """What is wrong with a sweep.json's contents, or None."""
    if not isinstance(data, dict):
        return "not an object"
    for key in ("diverged", "keys", "items"):
        if key in data and not _strings(data[key]):
            return f"{key!r} is not a list of texts"
    if "diverged" in data and not all(SAFE_NAME.fullmatch(n) for n in data["diverged"]):
        return "'diverged' names a folder a sweep does not make"
    if data.get("config") is not None and not isinstance(data["config"], str):
        return "'config' is not a path"
    points = data.get("points", [])
    if not isinstance(points, list):
        return "'points' is not a list"
    return next((problem for p in points if (problem := _point_problem(p))), None)


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
        if key == EXTENDABLE and isinstance(stored.get(key), int) and stored[key] < value:
            if (run_dir / "checkpoint.pt").is_file() or not (run_dir / "summary.json").is_file():
                continue  # extended in place (or, interrupted, resumed with the new length)
            raise UserError(f"{run_dir} holds a finished run of {stored[key]} rounds without a checkpoint, so it "
                            f"cannot be extended to {value}; delete that folder to run it anew, or pass another --out")
        raise UserError(f"{run_dir} holds a run with {key}={json.dumps(stored.get(key))}, but this sweep's point "
                        f"has {key}={json.dumps(value)}; pass another --out, or delete that folder to run it anew")


def fedcluster_args(point: Point, run_dir: Path, config: str | None, threads: int | None) -> list[str]:
    """The ``fedcluster`` arguments of a point: resume an interrupted (or extend a finished) run, else run it."""
    extra = ["progress=false"] + ([f"threads={threads}"] if threads else [])
    if (run_dir / "checkpoint.pt").is_file():
        return ["resume", str(run_dir), f"rounds={point.config.rounds}", *extra]
    return ["run", *([config] if config else []), *point.overrides, f"out={run_dir}", *extra]


def stored_rounds(run_dir: Path) -> int | None:
    """The rounds a finished run has done (its summary.json), else None."""
    try:
        summary = parse_summary(run_dir / "summary.json")
    except RunFileError:
        return None
    rounds = summary.get("rounds") if summary else None
    return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None


class Runner:
    """Runs the points that are not finished in ``workers`` long-lived worker processes (:mod:`.workers`), reporting
    each as it ends with the time left; Ctrl-C or SIGTERM stops the runs (each keeps its checkpoint)."""

    def __init__(self, folder: Path, config: str | None, state: SweepState, workers: int,
                 threads: int | None) -> None:
        self.folder, self.config, self.state = folder, config, state
        self.workers, self.threads = workers, threads
        self.done, self.total, self.started = 0, 0, time.perf_counter()
        self.begun: dict[str, float] = {}

    def plan(self, points: list[Point]) -> tuple[list[Outcome], list[Point]]:
        """The points already done (as outcomes) and those to run."""
        outcomes, todo = [], []
        for p in points:
            rounds = stored_rounds(self.folder / p.name) if finished(self.folder / p.name) else None
            if rounds is not None and rounds >= p.config.rounds:
                outcomes.append(Outcome(p.name, "skipped", note="finished earlier"))
            elif p.name in self.state.diverged():
                outcomes.append(Outcome(p.name, "diverged", note="diverged earlier; delete its folder to run it again"))
            else:
                todo.append(p)
        return outcomes, todo

    def run_all(self, points: list[Point]) -> list[Outcome]:
        outcomes, todo = self.plan(points)
        extend = sum(finished(self.folder / p.name) for p in todo)
        resumed = sum((self.folder / p.name / "checkpoint.pt").is_file() for p in todo) - extend
        workers = min(self.workers, len(todo)) or 1
        print(f"sweep: {len(points)} runs in {self.folder}: {len(points) - len(todo)} done earlier, {resumed} to "
              f"resume, {len(todo) - resumed - extend} to start"
              + (f", {extend} to extend to more rounds" if extend else "") + f"; {workers} at a time",
              file=sys.stderr)
        if not todo:
            return outcomes
        (self.folder / LOGS).mkdir(exist_ok=True)
        self.total, self.started = len(todo), time.perf_counter()
        self.bar = tqdm(total=len(todo), unit="run", desc="sweep", file=sys.stderr, dynamic_ncols=True,
                        disable=not sys.stderr.isatty())
        try:
            with stopping_signals() as stop:
                outcomes += self._run(todo, workers, stop)
        finally:
            self.bar.close()
        return outcomes

    def _run(self, todo: list[Point], workers: int, stop: Stop) -> list[Outcome]:
        outcomes: list[Outcome] = []
        waiting = list(todo)
        points = {p.name: p for p in todo}
        pool = Pool(workers, CLI)
        try:
            while waiting or pool.busy():
                while waiting and pool.idle() and stop.signum is None and not self._refused(outcomes):
                    point = waiting.pop(0)
                    pool.submit(Task(point.name, self._args(point), self.folder / LOGS / f"{point.name}.log"))
                    self.begun[point.name] = time.perf_counter()
                if not pool.busy():
                    break
                for task, rc in pool.results(timeout=None):
                    outcomes.append(self._ended(points[task.key], rc, task.log))
        except KeyboardInterrupt:
            stop.signum = stop.signum or signal.SIGINT
        if stop.signum is not None:
            outcomes += self._stop(pool, points)
            outcomes.append(Outcome("", "interrupted", rc=128 + stop.signum))
        pool.close()
        return outcomes + [Outcome(p.name, "not started") for p in waiting]

    def _stop(self, pool: Pool, points: dict[str, Point]) -> list[Outcome]:
        """Pass the signal on to the running runs once and wait for them to keep their checkpoints."""
        pool.send_signal(signal.SIGINT)
        outcomes = []
        while pool.busy():
            try:
                ended = pool.results(timeout=None)
            except KeyboardInterrupt:  # a second Ctrl-C: the runs are stopped at once
                for w in pool.busy():
                    w.send_signal(signal.SIGKILL)
                continue
            outcomes += [self._ended(points[task.key], rc, task.log, stopping=True) for task, rc in ended]
        return outcomes

    @staticmethod
    def _refused(outcomes: list[Outcome]) -> bool:
        return any(o.status == "failed" and o.rc == EXIT_USAGE for o in outcomes)

    def _args(self, point: Point) -> list[str]:
        args = fedcluster_args(point, self.folder / point.name, self.config, self.threads)
        log = self.folder / LOGS / f"{point.name}.log"
        with log.open("a", encoding="utf-8") as out:
            out.write(f"$ fedcluster {' '.join(args)}\n")
        return args

    def _ended(self, point: Point, rc: int, log: Path, stopping: bool = False) -> Outcome:
        seconds = time.perf_counter() - self.begun.get(point.name, self.started)
        if stopping and rc not in (0, EXIT_DIVERGED):
            rc = EXIT_INTERRUPTED
        outcome = self._outcome(point, rc, seconds, log)
        self.done += 1
        self.bar.update(1)
        left = ""
        if self.done < self.total:
            left = f"; about {_duration((time.perf_counter() - self.started) / self.done * (self.total - self.done))}" \
                   " left"
        line = f"[{self.done}/{self.total}] {point.name}: {outcome.status}" \
               f"{' (' + outcome.note + ')' if outcome.note else ''}{left}"
        self.bar.write(line, file=sys.stderr) if not self.bar.disable else print(line, file=sys.stderr)
        return outcome

    def _outcome(self, point: Point, rc: int, seconds: float, log: Path) -> Outcome:
        run_dir = self.folder / point.name
        if rc == 0 and (stored_rounds(run_dir) or 0) < point.config.rounds:  # stopped after its last checkpoint
            return Outcome(point.name, "failed", seconds, f"ended without a summary.json: {last_error(log)}", 1)
        if rc == 0:
            self.state.mark(point.name, diverged=False)
            summary = parse_summary(run_dir / "summary.json") or {}
            val = summary.get("final", {}).get("val_acc")
            note = f"final val_acc {val:.4f}, " if isinstance(val, float) else ""
            return Outcome(point.name, "finished", seconds, f"{note}{seconds:.0f}s")
        if rc == EXIT_DIVERGED:
            self.state.mark(point.name, diverged=True)
            return Outcome(point.name, "diverged", seconds, f"see {log}")
        if rc in (EXIT_INTERRUPTED, -signal.SIGINT, -signal.SIGTERM):
            kept = (run_dir / "checkpoint.pt").is_file()
            return Outcome(point.name, "interrupted", seconds,
                           "resumes from its checkpoint on a rerun" if kept else "no checkpoint yet: starts again "
                                                                                 "on a rerun", EXIT_INTERRUPTED)
        if rc < 0:
            return Outcome(point.name, "failed", seconds, f"its process was killed by {signal.Signals(-rc).name} "
                                                          f"(see {log})", 1)
        return Outcome(point.name, "failed", seconds, f"exit {rc}: {last_error(log)}", rc)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


@dataclass
class Stop:
    signum: int | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM to the sweep: handled as Ctrl-C is."""


@contextmanager
def stopping_signals() -> Iterator[Stop]:
    """SIGTERM raises :class:`Terminated` (noting the signal) while the sweep runs; in the main thread only."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        if stop.signum is None:
            stop.signum = signum
            raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def last_error(log: Path) -> str:
    """The last ``error`` line of a run's log (what ``fedcluster`` said), else the last line."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
    except OSError:
        return f"see {log}"
    errors = [line for line in lines if "error" in line.lower()]
    return ((errors or lines or [""])[-1])[:300] + f" (see {log})"
