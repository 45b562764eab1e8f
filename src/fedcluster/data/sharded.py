"""A split of which this process holds only some clients' inputs (a rank of a run over several processes).

:class:`ShardedSplit` keeps the global layout of a :class:`~fedcluster.data.federation.Split` — the offsets
``ptr`` (so ``sizes``, ``owner()`` and ``num_clients`` are those of the whole federation), every label ``y``
(8 bytes a sample for classes, 4 for regression targets) and the ``fit`` mask of test clients — but the inputs
``x`` of the held clients only. Reading inputs goes through :meth:`take` / :meth:`client`, which map global rows
to the held ones and raise :class:`NotHeldError` for a row of another client; ``x`` itself raises, so that code
written for a whole split fails loudly instead of reading wrong rows. :meth:`local` gives the held clients'
rows as a plain :class:`Split` over the same client ids, where every other client has no rows.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from fedcluster.data.federation import ClientRows, Federation, Split
from fedcluster.storage.state_file import StateFileError, StateParts


class NotHeldError(RuntimeError):
    """Inputs of a client this process does not hold were read."""


class ShardedSplit(ClientRows):
    """The clients ``held`` (a boolean mask over the clients) of a split, with the split's global layout."""

    def __init__(self, x_held: torch.Tensor, y: torch.Tensor, ptr: np.ndarray, held: np.ndarray,
                 fit: np.ndarray | None = None) -> None:
        self.ptr = np.asarray(ptr, dtype=np.int64)
        self.held = np.asarray(held, dtype=bool)
        self.y, self.fit, self.x_held = y, fit, x_held
        if len(self.held) != self.num_clients or len(y) != self.ptr[-1]:
            raise ValueError("sharded split: held mask or labels do not match the offsets")
        self.held_rows = np.flatnonzero(np.repeat(self.held, self.sizes))  # global rows held, in order
        if len(x_held) != len(self.held_rows):
            raise ValueError("sharded split: inputs do not match the held clients' rows")
        self._local_of = np.full(self.num_samples, -1, dtype=np.int64)  # global row -> held row (-1: not held)
        self._local_of[self.held_rows] = np.arange(len(self.held_rows))
        self._local: Split | None = None

    @staticmethod
    def of(split: Split, held: np.ndarray) -> ShardedSplit:
        """``split`` with the inputs of the clients outside ``held`` dropped."""
        held = np.asarray(held, dtype=bool)
        rows = np.flatnonzero(np.repeat(held, split.sizes))
        x = split.x[torch.as_tensor(rows, device=split.x.device)] if len(rows) < len(split.x) else split.x
        return ShardedSplit(x, split.y, split.ptr, held, split.fit)

    # -- the global layout (offsets, sizes, owner: ClientRows) ------------------------------------
    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_held.shape[1:])

    @property
    def device(self) -> torch.device:
        return self.x_held.device

    # -- inputs: held rows only ------------------------------------------------------------------
    @property
    def x(self) -> torch.Tensor:
        raise NotHeldError("this process holds only some clients' inputs: read them with take(rows) or "
                           "client(i), or compute per client where the data are (Trainer.per_client)")

    def local_rows(self, rows: np.ndarray) -> np.ndarray:
        """Positions in the held inputs of the global ``rows``; raises :class:`NotHeldError` for another client's."""
        local = self._local_of[np.asarray(rows, dtype=np.int64)]
        if (local < 0).any():
            bad = int(np.asarray(rows)[np.flatnonzero(local < 0)[0]])
            raise NotHeldError(f"row {bad} (client {int(np.searchsorted(self.ptr, bad, side='right') - 1)}) is "
                               "not held by this process")
        return local

    def take(self, rows: np.ndarray) -> torch.Tensor:
        """The inputs of the global ``rows`` (all held)."""
        return self.x_held[torch.as_tensor(self.local_rows(rows), device=self.x_held.device)]

    def client(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = int(self.ptr[i]), int(self.ptr[i + 1])
        if not self.held[i]:
            raise NotHeldError(f"client {i} is not held by this process")
        return self.take(np.arange(lo, hi)), self.y[lo:hi]

    def set_inputs(self, x_held: torch.Tensor) -> None:
        """Replace the held inputs (same rows) in place."""
        if len(x_held) != len(self.held_rows):
            raise ValueError("sharded split: inputs do not match the held clients' rows")
        self.x_held, self._local = x_held, None

    def local(self) -> Split:
        """The held clients' rows as a Split over the same client ids (every other client without rows)."""
        if self._local is None:
            ptr = np.concatenate([[0], np.cumsum(np.where(self.held, self.sizes, 0))])
            idx = torch.as_tensor(self.held_rows, device=self.y.device)
            fit = None if self.fit is None else self.fit[self.held_rows]
            self._local = Split(self.x_held, self.y[idx], ptr, fit)
        return self._local

    def nbytes(self) -> int:
        """Bytes of the tensors this process holds (inputs and labels)."""
        return self.x_held.nbytes + self.y.nbytes

    # -- copies ----------------------------------------------------------------------------------
    def to(self, device: torch.device | str) -> ShardedSplit:
        return ShardedSplit(self.x_held.to(device), self.y.to(device), self.ptr, self.held, self.fit)

    def with_fit(self, fit: np.ndarray | None) -> ShardedSplit:
        return ShardedSplit(self.x_held, self.y, self.ptr, self.held, fit)


def client_shard(num_clients: int, rank: int, world: int) -> np.ndarray:
    """The clients of ``rank`` among ``world`` processes: client c belongs to rank c % world."""
    return np.arange(num_clients) % world == rank


def shard_federation(fed: Federation, rank: int, world: int) -> Federation:
    """``fed`` with the inputs of the training, validation and test clients of other ranks dropped (labels,
    offsets and ground truth stay whole)."""
    return dataclasses.replace(fed, **{
        name: ShardedSplit.of(split, client_shard(split.num_clients, rank, world))
        for name, split in (("train", fed.train), ("val", fed.val), ("test", fed.test))})


def held_bytes(fed: Federation) -> int:
    """Bytes of the data tensors (inputs and labels of train, val and test) this process holds."""
    return sum(s.nbytes() for s in (fed.train, fed.val, fed.test))


def read_share(path: Path, key: str, rank: int, world: int) -> Federation:
    """The federation cached at ``path`` (``Federation.save``) with only the inputs of ``rank``'s clients read
    from it: the file's checksum is checked by streaming it, and no other client's inputs are ever held."""
    with StateParts(path, "federation", key) as parts:
        names = {parts.tensor_at(name, "x") for name in ("train", "val", "test")}
        state = parts.load({n for n in names if n is not None})
        try:
            splits = {}
            for name in ("train", "val", "test"):
                part = state.pop(name)
                ptr = np.asarray(part["ptr"], dtype=np.int64)
                held = client_shard(len(ptr) - 1, rank, world)
                rows = np.flatnonzero(np.repeat(held, np.diff(ptr)))
                splits[name] = ShardedSplit(parts.rows(part["x"], rows), part["y"], ptr, held)
            fed = Federation(**splits, **state)
            fed.check_values()
            return fed
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
            raise StateFileError(path, f"does not describe a federation ({e})") from None
