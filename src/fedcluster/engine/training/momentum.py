"""Each client's SGD momentum buffer kept across rounds (``client_momentum=keep``).

The FedRC paper's public code (github.com/LINs-lab/FedRC) gives every client one ``torch.optim.SGD`` per model it
holds (its *learners*, one per cluster model) and never re-creates them, so a client's momentum carries over from
one round to the next. By default (``client_momentum=reset``) every round's local training starts from a zero
buffer, as most FL code does. With ``keep``, a training unit's buffer is stored under
(stream, client, slot): the slot is the cluster model the unit starts from (``init_index``: model k of a clustered
method, 0 for FedAvg), so a client keeps one buffer per cluster model it trained, as the reference keeps one optimizer
per learner; units without ``init_index`` (per-client starting points) use their rank among the call's units of
the same client. Only the rounds' training (stream 0) keeps buffers: training outside the rounds (FedRC-FT's
fine-tuning at evaluation, stream 1) starts from zero every time, so that results do not depend on how often a run
evaluates. Buffers live on the device of the training data and are created as zeros the first time a key trains.
Memory: one model's parameters per (client, cluster model) pair that trained.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedcluster.engine.params import Params

MODES = ("reset", "keep")


def unit_keys(clients: np.ndarray, stream: int, init_index: np.ndarray | None) -> list[tuple[int, int, int]]:
    """(stream, client, slot) of every unit of one training call (see the module docstring)."""
    if init_index is not None:
        return [(stream, int(c), int(k)) for c, k in zip(clients, init_index, strict=True)]
    seen: dict[int, int] = {}
    keys = []
    for c in clients:
        c = int(c)
        keys.append((stream, c, seen.get(c, 0)))
        seen[c] = seen.get(c, 0) + 1
    return keys


class ClientMomentum:
    """Momentum buffers by (stream, client, slot): rows of one stacked tensor per parameter."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.rows: dict[tuple[int, int, int], int] = {}
        self.buffers: Params = {}

    def gather(self, keys: list[tuple[int, int, int]], like: Params) -> Params:
        """The buffers of ``keys`` as a new stack [U, ...] (zeros for a key never trained), shaped like ``like``'s
        entries [R, ...]."""
        new = [k for k in dict.fromkeys(keys) if k not in self.rows]
        if new:
            for k in new:
                self.rows[k] = len(self.rows)
            grow = {n: torch.zeros((len(new), *v.shape[1:]), dtype=v.dtype, device=self.device)
                    for n, v in like.items()}
            self.buffers = grow if not self.buffers else {n: torch.cat([self.buffers[n], grow[n]])
                                                          for n in self.buffers}
        if (span := self.span(keys)) is not None:  # the keys' rows in order (every round after the first)
            return {n: v[span] for n, v in self.buffers.items()}  # views: training updates the buffers in place
        idx = self.index(keys)
        return {n: v.index_select(0, idx) for n, v in self.buffers.items()}

    def put(self, keys: list[tuple[int, int, int]], values: Params) -> None:
        """Store ``values`` [U, ...] as the buffers of ``keys`` (gathered before; views :meth:`gather` handed out are
        already in place)."""
        span = self.span(keys)
        idx = None
        for n, v in self.buffers.items():
            if span is not None and _same_memory(values[n], v[span]):
                continue
            idx = self.index(keys) if idx is None else idx
            v.index_copy_(0, idx, values[n].to(v.dtype))

    def span(self, keys: list[tuple[int, int, int]]) -> slice | None:
        """The slice of buffer rows holding ``keys`` when they are consecutive rows in order (no key twice)."""
        if not keys:
            return None
        first = self.rows[keys[0]]
        if any(self.rows[k] != first + i for i, k in enumerate(keys)):
            return None
        return slice(first, first + len(keys))

    def index(self, keys: list[tuple[int, int, int]]) -> torch.Tensor:
        return torch.as_tensor([self.rows[k] for k in keys], dtype=torch.int64, device=self.device)

    def state_dict(self) -> dict[str, Any]:
        keys = np.array(sorted(self.rows, key=lambda key: self.rows[key]), dtype=np.int64).reshape(-1, 3)
        return {"keys": keys, "buffers": dict(self.buffers)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        keys = np.asarray(state["keys"], dtype=np.int64).reshape(-1, 3)
        buffers = {n: v.to(self.device) for n, v in state["buffers"].items()}
        if any(v.shape[0] != len(keys) for v in buffers.values()):
            raise ValueError("the stored momentum buffers do not match their keys")
        self.rows = {(int(a), int(b), int(c)): i for i, (a, b, c) in enumerate(keys)}
        self.buffers = buffers


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` is the very view ``b`` (same storage, offset, shape and strides)."""
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
