"""Parts of one reproduction run side by side in worker processes (``fedcluster reproduce --workers N``).

A part is one seed's missing records of one setting. Each worker runs a part with the same runner as the
sequential loop (told that every other setting of that seed is done) and sends every record back as soon as it
exists, so the caller stores it at once (a stopped run keeps every finished record). A record depends only on its
(seed, setting, method), so the results are those of the sequential loop, in another order; the stored results
are read in seed order.

Parts are handed out one at a time as workers free up: first the settings with no timed record yet (in the
experiment's order, seed by seed), then the dearest by their records' mean time, so that the last minutes do not
leave workers idle behind one long seed.
"""

from __future__ import annotations

import math
import multiprocessing
import queue
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from fedcluster.reproduce.run_common import Emit
from fedcluster.reproduce.spec import Experiment

POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Part:
    """One seed's records of one setting still to run: ``done`` marks every other setting's records (and this
    setting's stored ones) as done for the runner; ``left`` counts the runs it holds."""

    seed: int
    setting: str
    done: frozenset[tuple[str, str]]
    left: int


def parts(exp: Experiment, todo: dict[int, set[tuple[str, str]]]) -> list[Part]:
    """The parts of ``todo`` (seed -> the (setting, method) pairs already stored), seed by seed in the order of the
    experiment's settings; settings with nothing left are left out."""
    everything = set(exp.pairs())
    pairs = {s.name: {pair for pair in everything if pair[0] == s.name} for s in exp.settings}
    out = []
    for seed, done in todo.items():
        for name, own in pairs.items():
            left = own - done
            if left:
                out.append(Part(seed, name, frozenset((everything - own) | (own & done)), len(left)))
    return out


def next_part(waiting: Sequence[Part], seconds: dict[str, list[float]]) -> Part:
    """The part to start next: the first whose setting has no timed record yet, else the one with the most expected
    time (its runs × its setting's mean seconds a record)."""
    untimed = [p for p in waiting if not seconds.get(p.setting)]
    if untimed:
        return untimed[0]
    return max(waiting, key=lambda p: p.left * math.fsum(seconds[p.setting]) / len(seconds[p.setting]))


def _run_part(runner: str, name: str, budget: str, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
              records: Any) -> int:
    """In a worker: the missing records ``done`` leaves of one seed, each put on ``records`` as it finishes
    (``runner``: "package.module:function")."""
    from fedcluster.reproduce.catalogue import get

    exp = get(name).trimmed(budget)
    module, fn = runner.split(":")
    run = getattr(import_module(module), fn)
    run(exp, exp.budget(budget), seed, list(extra), done, records.put)
    return seed


def run_parts(runner: str, name: str, budget: str, todo: Iterable[Part], extra: Sequence[str], emit: Emit,
              workers: int, timed: Iterable[dict[str, Any]] = ()) -> None:
    """Run the parts ``todo`` in up to ``workers`` processes, handing each out when a worker frees up
    (:func:`next_part`, learning from ``timed``, the stored records, and from every new record); ``emit`` every
    record in this process as it arrives. A worker's error is raised here once every other part has finished and
    its records are stored."""
    waiting = list(todo)
    seconds: dict[str, list[float]] = defaultdict(list)

    def learn(record: dict[str, Any]) -> None:  # a diverged run's time says nothing of its setting's cost
        if "diverged" not in record and record.get("seconds") is not None:
            seconds[record["setting"]].append(float(record["seconds"]))

    for r in timed:
        learn(r)

    def store(record: dict[str, Any]) -> None:
        learn(record)
        emit(record)

    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch threads or CUDA
    with context.Manager() as manager, ProcessPoolExecutor(workers, mp_context=context) as pool:
        records = manager.Queue()
        running: set[Future[int]] = set()
        finished: list[Future[int]] = []
        while waiting or running:
            while waiting and len(running) < workers:
                part = next_part(waiting, seconds)
                waiting.remove(part)
                running.add(pool.submit(_run_part, runner, name, budget, part.seed, list(extra), set(part.done),
                                        records))
            _drain(records, store, block=True)
            done_now, running = wait(running, timeout=0, return_when=FIRST_COMPLETED)
            finished.extend(done_now)
        _drain(records, store, block=False)
        for future in finished:
            future.result()  # re-raises a worker's error


def _drain(records: Any, emit: Emit, block: bool) -> None:
    """Emit every queued record; with ``block`` wait up to POLL_SECONDS for the first."""
    try:
        emit(records.get(timeout=POLL_SECONDS) if block else records.get_nowait())
    except queue.Empty:
        return
    while True:
        try:
            emit(records.get_nowait())
        except queue.Empty:
            return
