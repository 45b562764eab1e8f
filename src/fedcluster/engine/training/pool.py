"""The worker processes of the ``pool`` training paths, started once per run and reused every round.

``fork`` starts workers in milliseconds and shares the training tensors copy-on-write, but it is unsafe
once autograd has run in the parent on a PyTorch build with accelerator support: such builds start
autograd device threads, and a forked child then fails with "Unable to handle autograd's threading in
combination with fork-based multiprocessing". Those builds get ``forkserver`` instead: a clean server
process (torch imported once, then forked per worker, autograd never run in it) and the training tensors
passed once per worker through shared memory (torch.multiprocessing), never per job.
"""

from __future__ import annotations

import multiprocessing.pool
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing as tmp


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
        ctx.set_forkserver_preload(["torch", "fedcluster.engine.backends.local"])  # imported once, in the server
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
