"""The round plan of a cluster method: what tiers 1–2 decide before a round trains (HCFL paper Alg. 1 lines 1–2;
FedRC paper Alg. 1 step 3), and what the round sends and uploads because of it.

Two kinds, by what trains:

* soft (:meth:`RoundPlan.soft`) — per-row weights γ [n, K] and aggregation weights A [m, K]: every (client, k) pair
  trains with γ_{·;k} (FedRC paper eq. 5; with a shared extractor one unit per client with all K heads, HCFL paper
  eq. 6–7) and cluster k averages the pairs with A_{·k} (FedRC paper Alg. 1 step 4);
* hard (:meth:`RoundPlan.hard`) — each client's position [m]: one unit per client trains from its cluster's model
  (or from ``init``, FedSoft's personal model). A is known before training (IFCA: N_i at the chosen cluster) or set
  by :meth:`RoundPlan.join` once a rule has seen the trained models (FeSEM's nearest model).

``gamma`` and ``omega`` are what the round records as γ and Ω of the cohort (a hard plan's one-hot rows once joined;
FedRC-TrHC's hard plan keeps its soft E-step). With A known before training (``folds``) the round folds each
trained chunk into the K weighted sums (engine.trainers.fold) and keeps no trained model.

Communication is the plan's too: the models each client receives (``sent``: one count for every client, or one per
client) and uploads (``uploaded``), a table sent both ways (``table``: FedRC's C_{y,k} down and F_i up, FedGMM's
Gaussian statistics) and bytes only uploaded (``extra_up``: ω̃, prototypes, a low-rank model). :meth:`RoundPlan.bytes`
is the one place that turns them into the round's bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.tiers.cohort import Cohort
from fedcluster.tiers.weighting import one_hot

Count = int | np.ndarray  # models per client: one number for the cohort, or [m]


@dataclass
class RoundPlan:
    """One round's tiers 1–2 decisions over ``cohort`` with K = ``k`` clusters (see the module docstring)."""

    cohort: Cohort
    k: int
    positions: np.ndarray | None = None  # hard: [m] the position each client's unit trains from; None: soft
    gamma: np.ndarray | None = None  # [n, K] soft: the pairs' training weights; what γ records
    omega: np.ndarray | None = None  # [m, K] what Ω records
    weights: np.ndarray | None = None  # A [m, K] (None: a hard rule joins after training)
    sent: Count = 1  # models each client receives
    uploaded: Count = 1  # models each client uploads
    table: int = 0  # bytes each client receives and uploads besides models (label table, Gaussian statistics)
    extra_up: int = 0  # bytes each client uploads besides models and table (ω̃, prototypes, a low-rank model)
    solver: Solver | None = None  # the local solver of the round (None: the run's)
    init: Params | None = None  # hard: [m, ...] each unit's start instead of its cluster's model
    anchor: Params | None = None  # hard: [m, ...] the proximal centre of each unit
    fold: bool = True  # False: the round reads the trained models (tier 4, personal models), so none is folded
    extra: dict[str, float] = field(default_factory=dict)  # the round's rounds.csv columns

    @staticmethod
    def soft(cohort: Cohort, gamma: np.ndarray, omega: np.ndarray, weights: np.ndarray, **comm: object) -> RoundPlan:
        """Every (client, k) pair trains with γ and is averaged with A; ``comm``: the other fields."""
        return RoundPlan(cohort, omega.shape[1], None, gamma, omega, weights, **comm)  # type: ignore[arg-type]

    @staticmethod
    def hard(cohort: Cohort, positions: np.ndarray, k: int, **fields: object) -> RoundPlan:
        """One unit per client from ``positions``; A, γ and Ω come with ``fields`` or from :meth:`join`."""
        return RoundPlan(cohort, k, np.asarray(positions, dtype=np.int64), **fields)  # type: ignore[arg-type]

    def join(self, clusters: np.ndarray) -> RoundPlan:
        """The clients join ``clusters`` [m]: Ω one-hot, γ its rows, A = N_i at the joined cluster."""
        self.omega = one_hot(clusters, self.k)
        self.gamma = self.omega[self.cohort.owner]
        self.weights = self.omega * self.cohort.sizes[:, None]
        return self

    @property
    def folds(self) -> bool:
        """Whether training folds into the aggregation: A known before training and no trained model read."""
        return self.fold and self.weights is not None

    def bytes(self, nbytes: Callable[[int], int]) -> tuple[int, int]:
        """(bytes up, bytes down) of the round; ``nbytes(n)``: the bytes of n cluster models (a shared extractor
        counts once, :meth:`~fedcluster.algorithms.cluster_method.ClusterMethod.nbytes`)."""
        m = self.cohort.m
        up = _models(self.uploaded, m, nbytes) + m * (self.table + self.extra_up)
        return int(up), int(_models(self.sent, m, nbytes) + m * self.table)


def _models(count: Count, m: int, nbytes: Callable[[int], int]) -> int:
    """Σ_i nbytes(count_i) over the cohort."""
    if isinstance(count, int | np.integer):
        return m * nbytes(int(count))
    values, times = np.unique(np.asarray(count, dtype=np.int64), return_counts=True)
    return sum(int(t) * nbytes(int(v)) for v, t in zip(values, times, strict=True))
