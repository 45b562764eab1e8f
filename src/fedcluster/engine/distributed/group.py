"""The process group of a torchrun job: joining and leaving it, this process's rank, and sums over the ranks.

Backends: gloo on the CPU, NCCL on CUDA (one GPU per local rank). A collective that fails because another rank
stopped raises :class:`RankLost`.
"""

from __future__ import annotations

import contextlib
import datetime
import os

import torch
import torch.distributed as dist

from fedcluster.engine.distributed.env import collective_timeout
from fedcluster.errors import UserError


class RankLost(RuntimeError):
    """A collective failed: another rank stopped (killed, crashed) or stopped answering."""


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def start(device: str) -> None:
    """Join the process group of this torchrun job (once): NCCL when the run computes on CUDA, else gloo."""
    if dist.is_initialized():
        return
    if device != "cpu" and torch.cuda.is_available():
        local, gpus = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
        if local >= gpus:
            raise UserError(f"local rank {local} has no GPU of its own ({gpus} on this machine): start at most "
                            f"{gpus} ranks per machine with device={device}, or use device=cpu")
        torch.cuda.set_device(local)
        backend = "nccl"
    else:
        backend = "gloo"
    timeout = collective_timeout()
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    except (RuntimeError, ValueError) as e:  # DistStoreError and DistNetworkError are RuntimeErrors
        env = " ".join(f"{k}={os.environ.get(k, '(unset)')[:40]}" for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                                            "MASTER_PORT"))
        reason = " ".join(str(e).split())[:160] or type(e).__name__
        raise UserError(f"cannot join the torchrun job of this environment ({env}) within {timeout:g} s: {reason}; "
                        "start every rank with torchrun, or unset RANK, WORLD_SIZE and MASTER_ADDR if an earlier "
                        "job left them") from None


def leave_group() -> None:
    """Leave the process group once every rank has finished, before the process exits (no-op outside one):
    gloo aborts a process that exits while still a member."""
    if dist.is_available() and dist.is_initialized():
        with contextlib.suppress(RuntimeError, dist.DistBackendError):
            dist.barrier()
            dist.destroy_process_group()


def all_reduce_sum(tensors: list[torch.Tensor]) -> None:
    """Sum ``tensors`` in place over the ranks: one collective per dtype."""
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        flat = torch.cat([t.reshape(-1) for t in group])
        try:
            dist.all_reduce(flat)
        except (RuntimeError, dist.DistBackendError) as e:
            raise RankLost(str(e)) from None
        i = 0
        for t in group:
            t.copy_(flat[i:i + t.numel()].view_as(t))
            i += t.numel()
