"""The worker processes of the ``pool`` training paths, started once per run and reused every round.

``fork`` starts workers in milliseconds and shares the training tensors copy-on-write, but it is unsafe
once autograd has run in the parent on a PyTorch build with accelerator support: such builds start
autograd device threads, and a forked child then fails with "Unable to handle autograd's threading in
combination with fork-based multiprocessing". Those builds get ``forkserver`` instead: a clean server
process (torch imported once, then forked per worker, autograd never run in it) and the training tensors
passed once per worker through shared memory (torch.multiprocessing), never per job.

:class:`TrainingPool` is the ``pool`` / ``pool-vectorized`` engine paths: a batch of units split over the workers,
longest first, each worker training its share with the sequential (or vectorised) kernel on one thread.
"""

from __future__ import annotations

import multiprocessing.pool
import signal
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as tmp
from torch import nn

from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.kernels import Batch, LossFn, slice_batch, train_sequential, train_vectorized


def accelerator_build() -> bool:
    """Whether this PyTorch build can start autograd device threads (CUDA, ROCm or XPU support)."""
    xpu = getattr(torch, "xpu", None)
    return bool(torch.version.cuda or torch.version.hip or (xpu is not None and xpu.is_available()))


def start_method() -> str:
    """``fork`` on CPU-only builds (cheapest, today's behaviour), ``forkserver`` where fork is unsafe."""
    return "forkserver" if accelerator_build() else "fork"


def start_pool(workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...],
               method: str | None = None) -> multiprocessing.pool.Pool:
    """A pool of ``workers`` processes, each running ``initializer(*initargs)`` once."""
    method = method or start_method()
    ctx = tmp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["torch", "fedcluster.engine.training.pool"])  # imported once, in the server
    return ctx.Pool(workers, initializer=initializer, initargs=initargs)


def stop_pool(pool: multiprocessing.pool.Pool, timeout: float = 10.0) -> None:
    """``pool.terminate()``, with its workers killed even when CPython's terminate gives up half-way.

    When its result thread has already ended while jobs are in flight (seen once in about 30 runs of
    Ctrl-C in the middle of a round), ``Pool.terminate`` raises "Cannot have cache with result_hander not
    alive" before it has stopped any worker.
    """
    workers = list(pool._pool)  # the worker processes (Pool keeps them in a private list)
    try:
        pool.terminate()
    except AssertionError:
        for worker in workers:
            worker.kill()
        for worker in workers:
            worker.join(timeout)


class TrainingPool:
    """The worker processes of one trainer, started at the first batch and reused until :meth:`close`: each holds
    the module, the training data and the loss (``vectorized``: the vectorised kernel, at most ``max_units`` units
    per call; else the sequential one)."""

    def __init__(self, workers: int, module: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: LossFn,
                 channels_last: bool, vectorized: bool, max_units: int, precision: str) -> None:
        self.workers = workers
        self._state = dict(module=module, x=x, y=y, loss=loss, cl=channels_last, vectorized=vectorized,
                           max_units=max_units, precision=precision)
        self._pool: multiprocessing.pool.Pool | None = None

    def train(self, batch: Batch, solver: Solver) -> Params:
        """Train ``batch``'s units over the workers (handed out longest first, round-robin, so that every worker
        gets similar work); the stack [U, ...] in the batch's order."""
        if self._pool is None:  # started once, reused by every round until close()
            _install_quiet_hook()  # before the workers start: forked workers inherit it too
            self._pool = start_pool(self.workers, _init_worker, (self._state,))
        order = np.argsort(-batch.steps, kind="stable")
        parts = [p for p in (order[i:: self.workers] for i in range(self.workers)) if len(p)]
        jobs = [self._pool.apply_async(_pool_job, (slice_batch(batch, p), solver)) for p in parts]
        out = batch.empty_out()
        for p, job in zip(parts, jobs, strict=True):
            res = job.get()
            idx = torch.as_tensor(p)
            for k in out:
                out[k][idx] = res[k]
        assert sum(len(p) for p in parts) == len(batch.steps)
        return out

    def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            stop_pool(pool)


_WORKER: dict = {}


def _init_worker(state: dict) -> None:
    """Runs once in each pool worker: one intra-op thread, the training data kept for every job; Ctrl-C is
    the parent's to handle (workers would print a traceback each)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    _WORKER.update(state)


_HOOK: list = []  # the excepthook that _quiet_lost_transfers replaced


def _quiet_lost_transfers(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """multiprocessing's tensor-sharing thread (resource_sharer) reports a peer that went away mid-transfer
    (Ctrl-C, pool.terminate) through sys.excepthook; that is not an error worth a traceback."""
    if issubclass(kind, ConnectionError | EOFError) and tb is not None \
            and tb.tb_frame.f_code.co_filename.endswith("resource_sharer.py"):
        return
    (_HOOK[0] if _HOOK else sys.__excepthook__)(kind, value, tb)


def _install_quiet_hook() -> None:
    if sys.excepthook is not _quiet_lost_transfers:
        _HOOK[:] = [sys.excepthook]
        sys.excepthook = _quiet_lost_transfers


def _pool_job(batch: Batch, solver: Solver) -> Params:
    w = _WORKER
    if w["vectorized"]:
        return train_vectorized(w["module"], w["x"], w["y"], batch, solver, w["loss"], w["max_units"],
                                w["precision"])
    return train_sequential(w["module"], w["x"], w["y"], batch, solver, w["loss"], w["cl"], w["precision"])
