"""``fedcluster reproduce --all``: the queue that settles the most per hour.

Every experiment not yet settled at the asked budget (no finished record at that budget or a larger one with as
many seeds) runs in turn, the cheapest first, under one time limit; every run is kept in the run store as it
finishes, so an experiment whose runs another one already made trains none of them again. With ``--publish``
the records of an experiment under way live in ``docs/reproduction/in-progress/`` and its page is published once
all its seeds are in.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fedcluster.errors import UserError
from fedcluster.reproduce.experiments import EXPERIMENTS, get
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.spec import BUDGET_RANK, Experiment

if TYPE_CHECKING:
    from fedcluster.reproduce.run_store import RunStore

IN_PROGRESS = "in-progress"
CLIENT_ROUND_SECONDS = 8e-3  # one client's round at the protocols with an MLP on one core (training and evaluation)


@dataclass(frozen=True)
class Entry:
    """One unsettled experiment, the seeds it runs (those asked, or as many as its published page holds, so that
    the page can be replaced) and what it is expected to cost (CPU hours: measured, or a size proxy)."""

    exp: Experiment
    hours: float
    measured: bool
    seeds: int


def settled(held: Stored | None, budget: str, seeds: int) -> bool:
    """Whether published results ``held`` already answer at ``budget`` with ``seeds`` seeds (or more)."""
    return (held is not None and held.finished and held.seeds >= seeds
            and BUDGET_RANK.get(held.budget, 0) >= BUDGET_RANK.get(budget, 0))


def expected_hours(exp: Experiment, budget: str, seeds: int, folders: tuple[Path, ...],
                   held: Stored | None = None) -> tuple[float, bool]:
    """CPU hours of ``exp`` at ``budget``: from a current ``--estimate`` in one of ``folders``; else computed from
    the wall time of ``held``, its finished records at another budget (as its page's "to settle it" column does);
    else a proxy from its size (runs × learning rates × clients × share of their data × rounds at 8 ms a
    client-round, about what an MLP takes at the papers' protocols on one core); and whether it was measured."""
    from fedcluster.reproduce.cost import budget_cpu_hours
    from fedcluster.reproduce.estimate import matching

    for folder in folders:
        found = matching(folder / f"{exp.name}.estimate.json", exp, budget)
        if found is not None:
            return found.cpu_hours(seeds), True
    if held is not None and held.finished and held.wall_seconds > 0 and held.budget in exp.budgets:
        return budget_cpu_hours(exp.budget(held.budget), exp.budget(budget), held.wall_seconds, held.seeds,
                                seeds), True
    b = exp.budget(budget)
    runs = seeds * len(exp.pairs()) * max(len(b.lr_grid), 1)
    return runs * b.clients * b.rounds * b.fraction * CLIENT_ROUND_SECONDS / 3600, False


def unsettled(budget: str, seeds: int, published: Path, folders: tuple[Path, ...]) -> list[Entry]:
    """The experiments that have ``budget`` (every one for the test budget) and are not settled in ``published``,
    cheapest first. An experiment whose published page holds more than ``seeds`` seeds runs that many: fewer
    could not replace the page (the publishing guard)."""
    found = []
    for name, exp in EXPERIMENTS.items():
        if budget != "tiny" and budget not in exp.budgets:
            continue
        held = Stored.load(published / f"{name}.json")
        stale = held is not None and held.stale(exp.trimmed(held.budget).protocol(held.budget))
        if settled(held, budget, seeds) and not stale:  # records of an earlier protocol settle nothing
            continue
        need = max(seeds, held.seeds) if held is not None and held.finished else seeds
        hours, measured = expected_hours(exp.trimmed(budget), budget, need, folders, held)
        found.append(Entry(exp, hours * (1 - done_share(exp, budget, need, folders)), measured, need))
    return sorted(found, key=lambda e: (e.hours, e.exp.name))


def done_share(exp: Experiment, budget: str, seeds: int, folders: tuple[Path, ...]) -> float:
    """The share of ``exp``'s runs at ``budget`` already recorded by an earlier, stopped call in one of ``folders``
    (0 when none): what is left of it is what it costs."""
    expected = seeds * len(exp.pairs())
    for folder in folders:
        held = Stored.load(folder / f"{exp.name}.json")
        if held is not None and not held.finished and held.budget == budget and expected:
            return min(sum(r["seed"] < seeds for r in held.records) / expected, 1.0)
    return 0.0


def run_queue(args: argparse.Namespace, out: Path, publishing: bool, store: RunStore) -> int:
    """Run the unsettled experiments cheapest first until the time limit (if any); publish each as it finishes."""
    from fedcluster.reproduce.pages import write_experiment, write_summary
    from fedcluster.reproduce.running import guard_published, run_experiment

    seeds = 3 if args.seeds is None else args.seeds
    work = out / IN_PROGRESS if publishing else out
    queue = unsettled(args.budget, seeds, out, (work, out))
    if not queue:
        print(f"every experiment with a {args.budget} budget is settled in {out} ({seeds} seeds); nothing to run")
        return 0
    listed = ", ".join(f"{e.exp.name} ({e.hours:.2g} h{'' if e.measured else ', rough'}"
                       f"{'' if e.seeds == seeds else f', {e.seeds} seeds as its page holds'})" for e in queue)
    print(f"the queue at the {args.budget} budget, {seeds} seeds, cheapest first (CPU hours): {listed}",
          file=sys.stderr, flush=True)
    deadline = None if args.time_limit is None else time.monotonic() + 60 * args.time_limit
    done: list[str] = []
    for entry in queue:
        left = None if deadline is None else (deadline - time.monotonic()) / 60
        if left is not None and left <= 0:
            break
        exp = get(entry.exp.name).trimmed(args.budget)
        if args.budget not in ("tiny", *exp.budgets):
            continue
        one = argparse.Namespace(**{**vars(args), "name": exp.name, "seeds": entry.seeds, "time_limit": left,
                                    "fresh": False})
        work.mkdir(parents=True, exist_ok=True)
        try:
            finished = run_experiment(exp, one, work, work / f"{exp.name}.json", store)
        except UserError as e:  # e.g. data it needs are not here: said, and the queue goes on
            print(f"{exp.name}: skipped: {e}", file=sys.stderr, flush=True)
            continue
        if finished is None:  # the time limit
            break
        if work != out:
            try:
                guard_published(out / f"{exp.name}.json", args.budget, entry.seeds, "publishing")
            except UserError as e:  # the published page holds a larger budget: these records wait, the queue goes on
                print(f"{exp.name}: finished, kept in {work} and not published: {e}", file=sys.stderr, flush=True)
                continue
            publish(exp, finished, work, out)
        page = write_experiment(exp, finished, out)
        write_summary(out)
        done.append(exp.name)
        print(f"{exp.name}: settled at the {args.budget} budget ({finished.wall_seconds / 60:.1f} min); wrote {page}",
              file=sys.stderr, flush=True)
    rest = [e.exp.name for e in queue if e.exp.name not in done]
    print(f"the queue settled {len(done)} experiment(s)" + (f"; {len(rest)} left ({', '.join(rest)}): the same command "
                                                           "continues" if rest else ""))
    return 0


def publish(exp: Experiment, finished: Stored, work: Path, out: Path) -> None:
    """Move ``exp``'s finished records from ``work`` into ``out``; results they replace are moved aside, and a
    hand-written reading of them is kept under the old budget's name (it describes other numbers)."""
    target = out / f"{exp.name}.json"
    held = Stored.load(target)
    if held is not None:
        held.move_aside(target, time.strftime("%Y%m%d-%H%M%S"))
        note = out / f"{exp.name}.reading.md"
        if note.is_file() and held.budget != finished.budget:
            note.replace(out / f"{exp.name}.{held.budget}.reading.md")
    finished.save(target)
    (work / f"{exp.name}.json").unlink(missing_ok=True)
