"""Each rank's share of the federation: rank 0 builds it (or reads the cache) and writes the cache; the other
ranks then read only their clients' inputs from the cache file (all of it, then drop the rest, when it could not be
written). Labels, offsets and ground truth stay whole (:mod:`fedcluster.data.sharded`)."""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

import torch

from fedcluster.config.run_config import RunConfig
from fedcluster.data.build import build_federation, cache_key, cache_path
from fedcluster.data.federation import Federation
from fedcluster.data.normalize import standardize_with
from fedcluster.data.sharded import ShardedSplit, read_share, shard_federation
from fedcluster.engine.distributed.state import broadcast_stats
from fedcluster.storage.state_file import StateFileError


def load_share(cfg: RunConfig, params: Any, rank: int, world: int, device: torch.device) -> Federation:
    """The federation on rank 0, this rank's clients' share of it elsewhere (module docstring). Image inputs are
    standardised with the whole federation's statistics, which rank 0 sends."""
    fed, failed = None, False
    if rank == 0:
        try:
            fed = build_federation(cfg, params)
        except BaseException:
            failed = True  # the others must not wait: they stop too, rank 0 says why
            broadcast_stats(None, failed, device)
            raise
    stats = broadcast_stats(fed.info.get("normalization") if fed is not None else None, failed, device)
    if rank == 0:
        assert fed is not None  # built, or the error was raised above
        return fed
    key = cache_key(cfg, params)
    path = cache_path(cfg, params, key)
    try:
        fed = read_share(path, key, rank, world)
    except (StateFileError, OSError):  # no cache (e.g. not writable): build it whole, own_clients drops the rest
        return build_federation(cfg, params, use_cache=False)
    return standardize_with(fed, stats) if stats is not None else fed


def own_clients(fed: Federation, rank: int, world: int) -> Federation:
    """Only ``rank``'s clients' inputs (all of them in a world of one), the memory freed meanwhile returned."""
    if world > 1 and not isinstance(fed.train, ShardedSplit):
        fed = shard_federation(fed, rank, world)
    _return_freed_memory()
    return fed


def _return_freed_memory() -> None:
    """Give the heap memory freed while reading or building the federation back to the system (glibc keeps
    freed blocks below its trim threshold, tens of megabytes, in the process otherwise); nothing elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
