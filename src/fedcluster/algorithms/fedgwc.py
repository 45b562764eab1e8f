"""FedGWC (Licciardi, Leo, Fanì, Caputo & Ciccone, ICML 2025, "Interaction-Aware Gaussian Weighting for Clustered
Federated Learning"): clients are grouped by how their losses compare with their cohort's, through a Gaussian
reward, an interaction matrix that converges, and recursive spectral splits. Follows the paper's Algorithm 1
with the choices of the authors' code (github.com/davedleo/FedGWC, ``agents/servers.py``, ``ServerFedGWC``).

Per round, for every cluster c (one at the start), with its sampled members:

1. each trains θ_c; the server averages them (FedAvg inside c) and records each one's loss trajectory ℓ_i, its
   mini-batch loss at each local step (the trainer's per-step losses, :meth:`train_steps`), cut to the S steps
   every sampled member took;
2. Gaussian rewards r_i of the trajectories against the members' N_i-weighted mean and variance (eq. 1;
   :func:`~fedcluster.tiers.gaussian_weighting.gaussian_rewards`, ``loss_sampling_size`` as in the code);
3. the interaction matrix P^c (n_c × n_c, start 1/n_c²) moves on the sampled rows and columns:
   P_ij ← (1 − α) P_ij + α r_i / Σ r with α = (sampled members)/n_c (eq. 5; :func:`update_interaction`); the
   running mean squared change mse_c ← (1 − α) mse_c + α · change · (n_c / 100)²;
4. when mse_c < ε for ``patience`` consecutive rounds, c is clustered: W_ij = exp(−β ‖u_i − u_j‖²) on the
   unbiased perception vectors u_i (rows of P without the entries i and j; :func:`interaction_affinity`),
   spectral clustering into n = 2 … ``max_clusters`` parts (at most n_c / m), the n with the lowest
   Davies–Bouldin score kept if that score is below 1 (:func:`best_spectral_split`), and c is split into those
   parts, each starting from θ_c with its block of P^c (recursive splitting: a part with at least
   ``min_cluster_size`` members is tested again); when no n passes, mse_c is reset to 1.

``rounds.csv`` gets ``was`` — the Wasserstein Adjusted Score (Sec. 4; the silhouette of the current clustering on
the clients' sorted class frequencies, :func:`wasserstein_adjusted_score`, higher is better) — and ``was_db``
(the same with the Davies–Bouldin score, lower is better), both over all clients; ``mse`` (the largest mse_c of
the clusters still open to a split) and the ``splits`` count.

Adapted to fedcluster's one cohort per round (the code samples m clients inside every cluster):
* ε made independent of the cluster's size: P's entries are about r_i / Σ r ≈ 1/m and move by α times their
  noise, so a round's mean squared change scales as 1/n_c² (α/m = 1/n_c). The change is multiplied by
  (n_c / 100)², which leaves it as it is on a cluster of 100 clients (the paper's CIFAR-100 federations) and
  lets the paper's ε = 1e-5 mean the same on any federation. Measured on 40 digits clients (a 3:1 concept
  split, a quarter sampled per round, seeds 0–2): mse_c ≈ 5e-5 at round 40, ≈ 2e-5 at round 80, below ε and a
  split (ARI 1.0) at rounds 107–115; unscaled it stays above ε past round 125. The running mse starts at 1, as in
  the code, and forgets it at the rate (1 − α) per round (about 40 rounds at α = 0.25);
* the local steps S differ between clients of different sizes (the run's epochs and batch size); the trajectory
  keeps the steps every sampled member of the cluster took (the code runs a fixed S = ``num_local_iters``);
* ``patience`` defaults to round(M / cohort size), the rounds that see every client once (the code's
  round(n_c / m)); the parts tried are n = 2 … min(``max_clusters``, n_c / m, n_c − 1), m the cluster's members
  sampled in that round (the code's cap n_c / m, and its overall cap of 4).
* Full participation: FedGWC does not split. With every member sampled each round, eq. 5 sets
  P_ij ← (1 − α) P_ij + α r_i / Σ r with α = 1 for every i, j: each row is one constant r_i / Σ r and all
  columns are equal, so the interaction matrix records no interaction (which peers raise a client's reward),
  only one round's reward levels, and its running change has no memory to converge with. The code's cap n_c / m
  = 1 forbids the split there too. Measured on the digits demo (12 clients, 3 concepts that relabel the same
  images, all sampled): with the cap lifted the split test passed at round 2 and every child at once (7–8
  clusters, ARI ≈ 0 on seeds 0–2); spectral splits of P built from the demo's loss trajectories by the paper's
  eq. 1 and eq. 5 — under full participation with α ∈ {1, 0.3, 0.1}, or from random sub-cohorts of 3–6 clients
  — score ARI ≤ 0.45 at rounds 2–40: the three concepts are equally hard for the shared model, so their loss
  trajectories, and the Gaussian rewards, do not tell them apart. FedGWC separates concepts whose clients'
  losses differ from the cohort's (a minority concept, class imbalance), under partial participation;
* a part stays open to splitting when it has ≥ ``min_cluster_size`` members (the code: more than m);
* the perception vector u_i is client i's row of P (its own rewards next to each peer, eq. 5's index order); the
  authors' code compares columns (``perception=column``: the peers' rewards next to i). On the test federations
  of ``tests/algorithms/test_grouping_methods.py`` (40 clients, a 3:1 majority/minority concept split, round 80)
  spectral clustering of the rows recovers the two concepts (ARI 1.0 for β ∈ [1, 10]) and of the columns does not
  (ARI ≈ 0): the rows carry each client's reward level, the columns only the small effect of i on its peers.
Defaults otherwise follow the authors' code: β = 4 (``ServerFedGWC``'s gamma; its command line passes 0.1),
ε = 1e-5, loss_sampling_size = 10.
Test clients take the cluster with the lowest loss on their labelled data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.data.federation import Split
from fedcluster.engine.params import select
from fedcluster.tiers.gaussian_weighting import (
    class_frequencies,
    gaussian_rewards,
    update_interaction,
    wasserstein_adjusted_score,
)
from fedcluster.tiers.regrouping import SpectralSplits
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Counts, Flags, non_negative, num_models

PAPER = ("Alessandro Licciardi, Davide Leo, Eros Fanì, Barbara Caputo, Marco Ciccone. Interaction-Aware Gaussian "
         "Weighting for Clustered Federated Learning. International Conference on Machine Learning (ICML), PMLR 267, "
         "2025.")


REFERENCE_CLIENTS = 100  # ε is the paper's for a cluster of this many clients (its CIFAR-100 federations)


def common_steps(trajectory: np.ndarray) -> np.ndarray:
    """The loss trajectories [m, S] cut to the local steps every sampled client took (NaN marks steps past a
    client's last; each takes at least one)."""
    taken = int(np.isfinite(trajectory).sum(1).min())
    return trajectory[:, :max(taken, 1)]


@dataclass
class FedGWCParams(RangeChecked):
    beta: float = ranged(4.0, "> 0")  # β of the RBF affinity between perception vectors (gamma in the authors' code)
    eps: float = ranged(1e-5, "> 0")  # ε: P has converged when its running mean squared change is below this
    patience: int | None = ranged(None, ">= 1")  # rounds below ε before clustering (null: round(M / cohort size))
    max_clusters: int = ranged(4, ">= 2")  # largest number of parts one split tries
    min_cluster_size: int = ranged(4, ">= 3")  # a cluster with fewer members is not split again
    loss_sampling_size: int = ranged(10, ">= 0")  # complete the cohort's losses to this many Gaussian draws for μ, σ²
    perception: Literal["row", "column"] = "row"  # perception vector of i: its row of P / its column


@ALGORITHMS.register("fedgwc", "FedGWC: Gaussian rewards of client losses, interaction matrix, recursive spectral "
                     "splits; Wasserstein Adjusted Score in rounds.csv", FedGWCParams, paper=PAPER)
class FedGWC(HardClusters):
    adaptation: SpectralSplits
    interaction = Saved[list[np.ndarray]](non_negative(cluster_axis=0))  # per position, over its members
    mse = Saved[list[float]](non_negative(cluster_axis=0))
    waited = Saved[list[int]](Counts(at_most_rounds=True, cluster_axis=0))
    open = Saved[list[bool]](Flags(cluster_axis=0))

    def __init__(self, ctx: Context, params: FedGWCParams) -> None:
        split = SpectralSplits(params.beta, params.perception, params.max_clusters)
        super().__init__(ctx, params, k0=1, adaptation=split)
        m = ctx.fed.num_clients
        self.target = params.patience or max(1, round(m / ctx.cfg.cohort_size()))
        self.interaction = [np.full((m, m), 1.0 / m**2)]  # per position, over its members in id order
        self.mse, self.waited, self.open = [1.0], [0], [m >= params.min_cluster_size]
        self.frequencies = self._class_frequencies()

    def _class_frequencies(self) -> np.ndarray | None:
        fed = self.ctx.fed
        if fed.task != "classification":
            return None

        def counts(split: Split) -> np.ndarray:  # each client's class frequencies from its own labels
            return class_frequencies(split.y.cpu().numpy(), split.owner(), split.num_clients, fed.output_dim)

        return self.ctx.trainer.per_client(fed.train, counts)

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        pos = self.cluster[clients]
        local, trajectory = self.ctx.trainer.train_steps(select(self.models, pos), clients, self.ctx.solver, round_)
        self.fedavg(clients, local, pos)
        sizes = self.ctx.fed.train.sizes[clients].astype(np.float64)
        for c in range(self.num_clusters):  # positions appended by a split this round wait for the next one
            sel = np.flatnonzero(pos == c)
            if self.open[c] and len(sel) >= 2:
                self._observe(round_, c, clients[sel], common_steps(trajectory[sel]), sizes[sel])
        payload = len(clients) * self.model_bytes()
        return RoundResult(payload, payload, extra=self._metrics())

    def _observe(self, round_: int, c: int, sampled: np.ndarray, trajectory: np.ndarray, sizes: np.ndarray) -> None:
        """Steps 2–4 for cluster position ``c``."""
        p = self.params
        members = np.flatnonzero(self.cluster == c)
        rng = np.random.default_rng([self.ctx.cfg.seed, 34, round_, int(self.book.ids[c])])
        rewards = gaussian_rewards(trajectory, sizes, p.loss_sampling_size, rng)
        alpha = len(sampled) / len(members)
        self.interaction[c], change = update_interaction(self.interaction[c], np.searchsorted(members, sampled),
                                                         rewards, alpha)
        self.mse[c] = (1 - alpha) * self.mse[c] + alpha * change * (len(members) / REFERENCE_CLIENTS) ** 2
        self.waited[c] = self.waited[c] + 1 if self.mse[c] < p.eps else 0
        if self.waited[c] < self.target:
            return
        labels = self.adaptation.split(self.interaction[c], len(sampled), self.ctx.cfg.seed)
        if labels is None:
            self.mse[c] = 1.0
            return
        whole = self.interaction[c]
        for part in range(1, int(labels.max()) + 1):
            keep = labels == part
            self.split_cluster(c, members[keep])
            self._add_state(whole[np.ix_(keep, keep)], int(keep.sum()))
        keep = labels == 0
        self.interaction[c], self.mse[c], self.waited[c] = whole[np.ix_(keep, keep)], 1.0, 0
        self.open[c] = int(keep.sum()) >= p.min_cluster_size

    def _add_state(self, interaction: np.ndarray, size: int) -> None:
        self.interaction.append(interaction)
        self.mse.append(1.0)
        self.waited.append(0)
        self.open.append(size >= self.params.min_cluster_size)

    def _metrics(self) -> dict[str, float]:
        nan = float("nan")
        opened = [m for m, o in zip(self.mse, self.open, strict=True) if o]
        out = {"mse": max(opened) if opened else nan, "was": nan, "was_db": nan}
        if self.frequencies is not None:
            out["was"] = wasserstein_adjusted_score(self.frequencies, self.cluster, "silhouette")
            out["was_db"] = wasserstein_adjusted_score(self.frequencies, self.cluster, "davies-bouldin")
        return out

    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """Each cluster's interaction matrix square over its members (each field's own values: their kinds)."""
        if (problem := super().state_problem(state, rounds)) is not None:
            return problem
        k = num_models(state)
        members = np.bincount(np.asarray(state["cluster"], dtype=np.int64), minlength=k)
        for c, matrix in enumerate(state["interaction"]):
            if tuple(matrix.shape) != (members[c], members[c]):
                return (f"algorithm.interaction[{c}] has shape {list(matrix.shape)}; cluster {c} has {members[c]} "
                        "members")
        return None
