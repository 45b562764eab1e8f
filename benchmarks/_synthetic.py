"""A synthetic concept-shift federation for the speed and scaling benchmarks (random images, labels permuted
per concept), built in memory in seconds for any number of clients."""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.data.federation import Federation, Split


def synthetic_federation(clients: int, per_client: int, shape: tuple[int, ...], concepts: int = 3,
                         val_per_client: int = 10, test_per_concept: int = 100, seed: int = 0) -> Federation:
    """``clients`` × ``per_client`` uniform samples of ``shape``; client i has concept i mod ``concepts``, whose
    labels are a fixed permutation of 10 classes."""
    g = torch.Generator().manual_seed(seed)
    concept = np.arange(clients) % concepts
    perms = torch.stack([torch.as_tensor(np.random.default_rng([seed, c]).permutation(10)) for c in range(concepts)])

    def split(n_per: np.ndarray, owner_concept: np.ndarray) -> Split:
        n = int(n_per.sum())
        x = torch.rand(n, *shape, generator=g)
        raw = torch.randint(0, 10, (n,), generator=g)
        rows_concept = torch.as_tensor(np.repeat(owner_concept, n_per))
        return Split(x, perms[rows_concept, raw], np.concatenate([[0], np.cumsum(n_per)]).astype(np.int64))

    train = split(np.full(clients, per_client), concept)
    val = split(np.full(clients, val_per_client), concept)
    test = split(np.full(concepts, test_per_concept), np.arange(concepts))
    return Federation(train, val, test, concept, np.arange(concepts), num_classes=10,
                      info={"name": f"synthetic concept shift ({concepts} concepts)"})
