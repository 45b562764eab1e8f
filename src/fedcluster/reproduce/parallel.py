"""Seeds of one reproduction run side by side in worker processes (``fedcluster reproduce --workers N``).

Each worker runs one seed's missing records with the same runner as the sequential loop and sends every record
back as soon as it exists, so the caller stores it at once (a stopped run keeps every finished record). A record
depends only on its (seed, setting, method), so the results are those of the sequential loop, in another order;
the stored results are read in seed order.
"""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from importlib import import_module
from typing import Any

from fedcluster.reproduce.run_common import Emit

POLL_SECONDS = 0.5


def _run_seed(runner: str, name: str, budget: str, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
              records: Any) -> int:
    """In a worker: one seed's missing records, each put on ``records`` as it finishes (``runner``:
    "package.module:function")."""
    from fedcluster.reproduce.catalogue import get

    exp = get(name).trimmed(budget)
    module, fn = runner.split(":")
    run = getattr(import_module(module), fn)
    run(exp, exp.budget(budget), seed, list(extra), done, records.put)
    return seed


def run_seeds(runner: str, name: str, budget: str, todo: dict[int, set[tuple[str, str]]], extra: Sequence[str],
              emit: Emit, workers: int) -> None:
    """Run the seeds of ``todo`` (seed -> the (setting, method) pairs already stored) in up to ``workers``
    processes; ``emit`` every record in this process as it arrives. A worker's error is raised here once the
    records that did finish are stored."""
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch threads or CUDA
    with context.Manager() as manager, ProcessPoolExecutor(workers, mp_context=context) as pool:
        records = manager.Queue()
        pending: set[Future[int]] = {pool.submit(_run_seed, runner, name, budget, seed, list(extra), done, records)
                                     for seed, done in todo.items()}
        finished: list[Future[int]] = []
        while pending:
            _drain(records, emit, block=True)
            done_now, pending = wait(pending, timeout=0, return_when=FIRST_COMPLETED)
            finished.extend(done_now)
        _drain(records, emit, block=False)
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
