"""Parts of one reproduction run side by side in worker processes (``fedcluster reproduce --workers N``).

A part is one run of a suite experiment (one seed, setting and method), or, for the synthetic runners whose runs
take seconds, one seed's missing records of one setting. Each worker runs a part with the same runner as the
sequential loop (told that everything else of that seed is done) and sends every record back as soon as it
exists, so the caller stores it at once (a stopped run keeps every finished record). A record depends only on its
(seed, setting, method), so the results are those of the sequential loop, in another order; the stored results
are read in seed order. A run read at another run's best-train round (FedRC-FT at FedRC's) waits until that run
has finished: it then reads it from the run store instead of training it again.

Parts are handed out one at a time as workers free up: first the settings with no timed record yet (in the
experiment's order, seed by seed), then the dearest by their records' mean time, so that the last minutes do not
leave workers idle behind one long run. When the time limit stops the call, the runs under way are dropped (their
workers ended) and every finished one is already stored.
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
from pathlib import Path
from typing import Any

from fedcluster.reproduce.run_common import Emit
from fedcluster.reproduce.spec import Experiment

POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Part:
    """Records of one seed still to run: ``done`` marks every other record of that seed (and this part's stored
    ones) as done for the runner; ``left`` counts the runs it holds; ``after``: the (seed, setting, method) records
    it reads and so waits for (a best-train partner)."""

    seed: int
    setting: str
    done: frozenset[tuple[str, str]]
    left: int
    method: str = ""  # one run's part: its method label ("" : every method of the setting)
    after: frozenset[tuple[int, str, str]] = frozenset()

    @property
    def runs(self) -> set[tuple[int, str, str]]:
        """The (seed, setting, method) records this part makes, as far as they are known ("" for a whole setting)."""
        return {(self.seed, self.setting, self.method)}


def parts(exp: Experiment, todo: dict[int, set[tuple[str, str]]], by_run: bool = False) -> list[Part]:
    """The parts of ``todo`` (seed -> the (setting, method) pairs already stored), seed by seed in the order of the
    experiment's settings; settings with nothing left are left out. ``by_run``: one part per run (a suite
    experiment), a run read at another's best-train round after that run."""
    everything = set(exp.pairs())
    pairs = {s.name: [pair for pair in exp.pairs() if pair[0] == s.name] for s in exp.settings}
    partner = {m.label: m.read_at for m in exp.methods if m.read_at}
    out = []
    for seed, done in todo.items():
        for name, own in pairs.items():
            left = [pair for pair in own if pair not in done]
            if not left:
                continue
            if not by_run:
                out.append(Part(seed, name, frozenset((everything - set(own)) | (set(own) & done)), len(left)))
                continue
            for pair in left:
                after = (frozenset({(seed, name, partner[pair[1]])})
                         if pair[1] in partner and (name, partner[pair[1]]) in left else frozenset())
                out.append(Part(seed, name, frozenset(everything - {pair}), 1, pair[1], after))
    return out


def next_part(waiting: Sequence[Part], seconds: dict[str, list[float]],
              unfinished: set[tuple[int, str, str]] | None = None) -> Part | None:
    """The part to start next among those not waiting for an ``unfinished`` record: the first whose setting has no
    timed record yet, else the one with the most expected time (its runs × its setting's mean seconds a record);
    None when every part waits."""
    ready = [p for p in waiting if not (p.after & (unfinished or set()))]
    if not ready:
        return None
    untimed = [p for p in ready if not seconds.get(p.setting)]
    if untimed:
        return untimed[0]
    return max(ready, key=lambda p: p.left * math.fsum(seconds[p.setting]) / len(seconds[p.setting]))


def _run_part(runner: str, name: str | Experiment, budget: str, seed: int, extra: Sequence[str],
              done: set[tuple[str, str]], records: Any, store: str | None = None,
              env: dict[str, str] | None = None) -> int:
    """In a worker: the missing records ``done`` leaves of one seed, each put on ``records`` as it finishes
    (``name``: a catalogued experiment's name, or the experiment itself; ``runner``: "package.module:function";
    ``store``: the run store's folder, for the runners that use one;
    ``env``: variables for this process, e.g. its share of the accelerator's memory)."""
    import os

    os.environ.update(env or {})
    from fedcluster.reproduce.experiments import get

    exp = get(name).trimmed(budget) if isinstance(name, str) else name
    module, fn = runner.split(":")
    run = getattr(import_module(module), fn)
    if store is None:
        run(exp, exp.budget(budget), seed, list(extra), done, records.put)
    else:
        from fedcluster.reproduce.run_store import RunStore

        run(exp, exp.budget(budget), seed, list(extra), done, records.put, RunStore(Path(store)))
    return seed


def run_parts(runner: str, name: str | Experiment, budget: str, todo: Iterable[Part], extra: Sequence[str], emit: Emit,
              workers: int, timed: Iterable[dict[str, Any]] = (), store: str | None = None,
              env: dict[str, str] | None = None) -> None:
    """Run the parts ``todo`` in up to ``workers`` processes, handing each out when a worker frees up
    (:func:`next_part`, learning from ``timed``, the stored records, and from every new record; a part waits for
    the records it reads); ``emit`` every record in this process as it arrives. A worker's error is raised here
    once every other part has finished and its records are stored. An exception in this process (the time limit,
    Ctrl-C) ends the workers at once: the runs under way are dropped. ``env``: variables every worker sets."""
    waiting = list(todo)
    unfinished = set().union(*(p.runs for p in waiting)) if waiting else set()
    seconds: dict[str, list[float]] = defaultdict(list)

    def learn(record: dict[str, Any]) -> None:  # a diverged run's time says nothing of its setting's cost
        if "diverged" not in record and record.get("seconds") is not None:
            seconds[record["setting"]].append(float(record["seconds"]))

    for r in timed:
        learn(r)

    def keep(record: dict[str, Any]) -> None:
        learn(record)
        unfinished.discard((record["seed"], record["setting"], record["method"]))
        emit(record)

    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch threads or CUDA
    with context.Manager() as manager:
        pool = ProcessPoolExecutor(workers, mp_context=context)
        try:
            records = manager.Queue()
            running: dict[Future[int], Part] = {}
            finished: list[Future[int]] = []
            while waiting or running:
                while waiting and len(running) < workers:
                    part = next_part(waiting, seconds, unfinished)
                    if part is None:
                        break
                    waiting.remove(part)
                    running[pool.submit(_run_part, runner, name, budget, part.seed, list(extra), set(part.done),
                                        records, store, env)] = part
                if not running:  # every waiting part reads a record that no part will make: run them anyway
                    unfinished.clear()
                    continue
                _drain(records, keep, block=True)
                done_now, _ = wait(running, timeout=0, return_when=FIRST_COMPLETED)
                for future in done_now:
                    unfinished.difference_update(running.pop(future).runs)  # made, failed or diverged: not waited for
                finished.extend(done_now)
            _drain(records, keep, block=False)
        except BaseException:
            _end_workers(pool)
            raise
        pool.shutdown(wait=True)
        for future in finished:
            future.result()  # re-raises a worker's error


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """End every worker of ``pool`` now (their runs under way are dropped) and release the pool."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(timeout=10)


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
