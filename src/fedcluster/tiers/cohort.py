"""The round's cohort as the tier parts see it: the sampled clients and their training rows, back to back."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Cohort:
    """Sampled clients ``clients`` [m]; their training ``rows`` [n] back to back and each row's cohort index
    ``owner`` [n] (0..m−1); the clients' sizes N_i (float64), the rows' labels on the host and, for a formulation
    that reads inputs, the rows' inputs ``x``."""

    clients: np.ndarray
    rows: np.ndarray
    owner: np.ndarray
    sizes: np.ndarray
    labels: np.ndarray
    x: torch.Tensor | None = None

    @property
    def m(self) -> int:
        return len(self.clients)

    def own_rows(self) -> list[np.ndarray]:
        """Each client's positions in row order (what ``owner == i`` selects), all found in one sort rather
        than one pass over the cohort's rows per client."""
        order = np.argsort(self.owner, kind="stable")
        return np.split(order, np.cumsum(np.bincount(self.owner, minlength=self.m))[:-1])


def segment_sum(values: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray:
    """[m, K] sums of the rows of ``values`` [N, K] per owner."""
    out = np.zeros((m, values.shape[1]))
    np.add.at(out, owner, values)
    return out


def segment_mean(values: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray:
    counts = np.bincount(owner, minlength=m)[:, None]
    return segment_sum(values, owner, m) / np.maximum(counts, 1)
