"""Minibatch schedules: which local samples each training unit sees at each step.

Every unit trains on one client's data. Its sample order comes from a generator seeded by
``(seed, round, client, stream)``, so every training path (vectorised, sequential, pool) sees exactly
the same batches, units of the same client share one order, and a resumed run repeats it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Schedule:
    """``local[u, s, b]``: local sample index; ``mask[u, s, b]``: 1 for a real sample, 0 for padding."""

    local: torch.Tensor  # int64 [U, S, B]
    mask: torch.Tensor  # float32 [U, S, B]
    steps: np.ndarray  # [U] real steps of each unit

    @property
    def num_steps(self) -> int:
        return int(self.local.shape[1])


def client_order(seed: int, round_: int, client: int, stream: int, n: int, epochs: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 2, round_, client, stream])
    return np.concatenate([rng.permutation(n) for _ in range(epochs)])


def make_schedule(
    sizes: np.ndarray, clients: np.ndarray, seed: int, round_: int, epochs: int, batch_size: int,
    stream: int = 0, max_steps: int | None = None, drop_last: bool = False,
) -> Schedule:
    """Batches of ``batch_size`` over ``epochs`` shuffled passes; the last batch of a pass may be short, or is
    dropped with ``drop_last`` (then a client with fewer than ``batch_size`` samples takes no step)."""
    per_epoch = [int(sizes[c] // batch_size if drop_last else np.ceil(sizes[c] / batch_size)) for c in clients]
    steps = np.array([p * epochs for p in per_epoch], dtype=np.int64)
    if max_steps is not None:
        steps = np.minimum(steps, max_steps)
    S, B, U = int(steps.max(initial=1)), batch_size, len(clients)
    local = np.zeros((U, S, B), dtype=np.int64)
    mask = np.zeros((U, S, B), dtype=np.float32)
    orders: dict[int, np.ndarray] = {}
    for u, c in enumerate(clients):
        c = int(c)
        if c not in orders:
            orders[c] = client_order(seed, round_, c, stream, int(sizes[c]), epochs)
        order, n = orders[c], int(sizes[c])
        for s in range(steps[u]):
            e, k = divmod(s, per_epoch[u])
            chunk = order[e * n + k * B: e * n + min((k + 1) * B, n)]
            local[u, s, : len(chunk)] = chunk
            mask[u, s, : len(chunk)] = 1.0
    return Schedule(torch.from_numpy(local), torch.from_numpy(mask), steps)
