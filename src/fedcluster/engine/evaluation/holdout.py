"""How a non-participating (test) client's cluster weights are chosen and scored.

FedRC paper H.2/H.5 let a test client pick its cluster (hard methods: the lowest loss) or run E-steps (soft methods) on
its labelled data and then score the resulting prediction on the same data. For a best-of-K pick this
selects on the labels it is scored on and inflates the accuracy of hard methods. ``test_fit``:

* ``half`` (default): a seeded random half of each test client's samples fits the weights, the other half
  is scored (a client with one sample uses it for both);
* ``all``: the FedRC paper's reading, every sample fits and is scored;
* ``90-10``: what FedRC's public code does, a seeded random 90 % fits and the other 10 % is scored.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from fedcluster.data.federation import Split

TestFit = Literal["half", "all", "90-10"]
FIT_SHARE = {"half": 0.5, "90-10": 0.9}


def with_fit_rows(split: Split, mode: TestFit, seed: int) -> Split:
    """``split`` with its ``fit`` mask set for ``mode``."""
    if mode == "all":
        return split.with_fit(None)
    rng = np.random.default_rng([seed, 81])
    fit = np.zeros(split.num_samples, dtype=bool)
    for c in range(split.num_clients):
        lo, hi = int(split.ptr[c]), int(split.ptr[c + 1])
        if hi - lo < 2:
            fit[lo:hi] = True
            continue
        n = hi - lo
        k = n // 2 if mode == "half" else min(n - 1, int(round(FIT_SHARE[mode] * n)))
        fit[lo + rng.permutation(n)[:k]] = True
    return split.with_fit(fit)


def fit_part(split: Split) -> Split:
    """The rows that fit the weights (all rows without a mask)."""
    return split if split.fit is None else split.rows(split.fit)


def scored_rows(split: Split) -> np.ndarray:
    """Boolean mask of the rows that are scored: the complement of ``fit`` (a one-sample client's row too)."""
    if split.fit is None:
        return np.ones(split.num_samples, dtype=bool)
    single = np.repeat(split.sizes < 2, split.sizes)
    return ~split.fit | single
