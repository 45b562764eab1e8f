"""Running one reproduction: its records continued or started, its runs (in worker processes with ``--workers``)
under an optional time limit, every record stored as it arrives; and the guard that keeps published pages from being
replaced by a smaller budget."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from fedcluster.errors import UserError
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.spec import BUDGET_RANK, Experiment

if TYPE_CHECKING:
    from fedcluster.reproduce.run_store import RunStore

RUNNERS = {"suite": "run_suite:run", "mixreg": "run_synthetic:run_mixreg", "lines": "run_synthetic:run_lines",
           "fedmd-rotation": "run_fedmd_rotation:run"}
DEFAULT_OUT = "runs/reproduction"  # a user's runs: pages here, the summary in runs/REPRODUCTION.md
PUBLISHED = "docs/reproduction"  # the pages of a fedcluster checkout: written only with --publish


class TimeLimit(BaseException):  # not an Exception: no handler of a run may take it for the run's own error
    """``--time-limit`` ran out."""


@contextlib.contextmanager
def time_limit(minutes: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimit` in this (main) thread once ``minutes`` have passed (nothing when None)."""
    if minutes is None:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimeLimit

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, minutes * 60)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def guard_published(path: Path, budget: str, seeds: int, what: str) -> None:
    """Refuse to replace published results by a smaller budget or fewer seeds (one line, exit 2)."""
    held = Stored.load(path)
    if held is None:
        return
    smaller = BUDGET_RANK.get(budget, 0) < BUDGET_RANK.get(held.budget, 0)
    fewer = seeds < held.seeds  # at any budget: a larger budget over fewer seeds says less about the noise
    if smaller or fewer:
        raise UserError(f"{path} holds {held.budget}-budget results over {held.seeds} seeds; {what} with "
                        f"{budget}, {seeds} seed(s) would replace them: drop --publish (your runs go to "
                        f"{DEFAULT_OUT}) or use --budget {held.budget} --seeds {held.seeds} or more")


def run_experiment(exp: Experiment, args: argparse.Namespace, out: Path, path: Path, store: RunStore) -> Stored | None:
    """Run (or continue) ``exp`` at ``args.budget`` over ``args.seeds`` seeds, every record stored in ``path`` as it
    arrives and every suite run in ``store``; the finished records, or None when the time limit stopped it."""
    from fedcluster.reproduce.run_common import device_overrides

    device, dev_over = device_overrides(args.device)
    budget = exp.budget(args.budget)
    out.mkdir(parents=True, exist_ok=True)
    stored = Stored.load(path)
    protocol = exp.protocol(args.budget)
    if stored is not None and (args.fresh or not stored.matches(args.budget, device, list(args.set), protocol,
                                                                 repr(budget))):
        kept = stored.move_aside(path, time.strftime("%Y%m%d-%H%M%S"))  # never lose results
        print(f"{path}: earlier results (another budget, device, --set or protocol, or --fresh) moved to {kept}; "
              "starting afresh", file=sys.stderr)
        stored = None
    if stored is None:
        stored = Stored(exp.name, args.budget, args.seeds, device, list(args.set))
    stored.seeds, stored.finished, stored.spec = args.seeds, False, protocol
    module, fn = RUNNERS[exp.kind].split(":")
    runner = getattr(import_module(f"fedcluster.reproduce.{module}"), fn)
    uses_store = exp.kind == "suite"
    t_start = time.perf_counter()
    wall0 = [stored.wall_seconds]  # a run read from the store counts with the time it took to train
    wanted = exp.runs_of(args.seeds)
    have = wanted & stored.keys()
    reused = [0]

    def emit(record: dict) -> None:
        record["curve"] = [[t, float(f"{v:.5g}")] for t, v in record["curve"]]  # compact file, plenty for a plot
        if record.pop("reused", False):
            reused[0] += 1
            wall0[0] += float(record.get("seconds") or 0.0)
        stored.records.append(record)
        stored.wall_seconds = wall0[0] + time.perf_counter() - t_start
        stored.date = time.strftime("%Y-%m-%d")
        stored.save(path)
        values = ", ".join(f"{k} {v:.4g}" for k, v in record["metrics"].items())
        key = (record["seed"], record["setting"], record["method"])
        have.update({key} & wanted)
        print(f"{exp.name} seed {record['seed']} {record['setting']} {record['method']}: {values} "
              f"({record['seconds']:.0f} s; {len(have)} of {len(wanted)} runs)", file=sys.stderr, flush=True)

    extra = [*args.set, *dev_over]
    todo = {seed: stored.done(seed) for seed in range(args.seeds)}
    from fedcluster.reproduce.parallel import parts, run_parts

    pending = parts(exp, todo, by_run=uses_store)
    workers = min(args.workers, len(pending))
    try:
        with time_limit(args.time_limit):
            if workers > 1:
                from fedcluster.config.validation import usable_cpus

                if not any(o.split("=", 1)[0].strip() == "threads" for o in args.set):  # share the cores
                    extra.append(f"threads={max(1, usable_cpus() // workers)}")
                run_parts(f"fedcluster.reproduce.{RUNNERS[exp.kind]}", exp.name, args.budget, pending, extra, emit,
                          workers, list(stored.records), str(store.root) if uses_store else None,
                          device_shares(device, workers))
            else:
                for seed, done in todo.items():
                    runner(exp, budget, seed, extra, done, emit, *([store] if uses_store else []))
    except TimeLimit:
        print(f"{exp.name}: the {args.time_limit:g}-minute limit stopped it with {len(have)} of {len(wanted)} runs "
              f"stored in {path}{_reused(reused[0])}; the same command again continues from them", file=sys.stderr)
        return None
    stored.finished = True
    stored.wall_seconds = wall0[0] + time.perf_counter() - t_start
    stored.date = time.strftime("%Y-%m-%d")
    stored.save(path)
    if reused[0]:
        print(f"{exp.name}:{_reused(reused[0])}", file=sys.stderr)
    return stored


def device_shares(device: str, workers: int) -> dict[str, str]:
    """The environment that gives each of ``workers`` runs on one accelerator its share of the memory plan, read once
    here (so that they never over-commit it); nothing on the CPU."""
    if device != "cuda":
        return {}
    import torch

    from fedcluster.engine.memory import SHARE_VARIABLE, device_memory, worker_share

    mem = device_memory(torch.device("cuda"))
    if mem is None:
        return {}
    share = worker_share(mem, workers)
    if share < 2**28:
        raise UserError(f"--workers {workers}: {mem.describe()}, too little for {workers} runs at once "
                        f"(each needs its CUDA context and room to train); use fewer --workers")
    return {SHARE_VARIABLE: str(share >> 20)}


def _reused(n: int) -> str:
    return f" ({n} run{'s' if n != 1 else ''} read from the run store, not trained again)" if n else ""
