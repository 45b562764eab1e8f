"""FLUX (Fenoglio, Li, Barbiero, Lane, Langheinrich & Gjoreski, "FLUX: Efficient Descriptor-Driven Clustered Federated
Learning under Arbitrary Distribution Shifts", NeurIPS 2025, arXiv:2511.22305): FedAvg until the global model is
good enough to describe the data, then one clustering of compact client descriptors with an unknown number of
clusters, FedAvg per cluster, and a label-free choice of cluster for clients that never trained.

The round follows the paper's four stages (client-side descriptor extraction, unsupervised clustering on the server,
cluster-specific training, test-time adaptation of unseen clients; its method section) with the choices of the
authors' code (dariofenoglio98/FLUX, ``flux/server.py``, ``flux/client.py``, ``public/models.py``):

1. **Warm-up** (FedAvg of one global model θ). The server watches the global model's accuracy on the clients'
   validation data (N_i-weighted, after every round); from round ``warmup`` on it clusters at the next round once any
   round has gained less than ``accuracy_delta`` (the code's ``th_round``, 0.05), or once 80 % of the rounds are
   done. ``cluster_round`` fixes the (0-based) clustering round instead.
2. **Descriptors** (clustering round, every client, with the received θ before it trains). With z = g(x; φ) the
   global model's features (the input of its last layer; the flattened input for a one-layer model), client i sends
   * the marginal descriptor P(X): the mean and the standard deviation of its features, per dimension;
   * with ``descriptors=pxy`` (the code's ``Pxy``) also the label-conditional descriptor P(Y|X): for every class c,
     the mean and the standard deviation of the global model's loss on its samples of class c (−1 for a class it
     lacks), as the code's extended descriptors.
   ``latent_dim`` projects the features first by a fixed random orthonormal map (the code projects to as many
   dimensions as classes, with a PCA fitted to uniform random points: a random rotation, there to keep LeNet's and
   ResNet's 400-512 features compact). Each group of the descriptor is min-max scaled to [0, 1] over the clients
   (one scale per group, the code's scaler).
3. **Clustering** with K unknown: HDBSCAN on the scaled descriptors (``min_cluster_size`` = 2, the code's
   ``HDBSCAN(min_cluster_size=2)``; scikit-learn's ``sklearn.cluster.HDBSCAN``), every client HDBSCAN calls noise
   made a cluster of its own (as the code's default DBSCAN route does). Each cluster's model starts from θ plus the
   N_i-weighted mean of its members' updates of this round; its centroid is the mean of its members' descriptors.
4. **Cluster training**: FedAvg inside each cluster (its sampled members).
5. **Test time**: a client that never trained computes the marginal descriptor alone, on its inputs and without its
   labels, with the same θ of step 2 (kept as ``descriptor_model``), scaled with the training scales, and predicts
   with the cluster whose centroid's marginal part is nearest (Euclidean), as the code's inference does.

Where fedcluster's defaults differ from the code's, and why (measured on digits, the logistic model, 12 clients, four
rotations 0/90/180/270°, the federation ``tests/algorithms/test_flux.py`` runs, seeds 0-4): the marginal descriptor
alone (``px``) and the features unprojected give ARI 1 and every unseen client its rotation's cluster on all five seeds
(also with 8 clients, and with two or three rotations); the code's ``pxy`` gives 0.42-0.65 there (about 10 samples
per class and client make the per-class loss statistics noise), and the projection to 10 dimensions 0.42-1.
HDBSCAN on a dozen or two clients is fragile: with 16-20 clients (about 60 samples each) or a label skew inside
each rotation it merges two rotations on most seeds (ARI 0.42-0.68).

What the descriptor sees: the marginal part tells clients apart by their inputs (feature shift, and label skew too);
the label-conditional part by how the global model's loss falls over the classes, which is what could separate
concepts that label the same inputs differently. On the digits demo (three such concepts over a label skew) neither
recovers the concepts: ARI about 0 with ``px`` and with ``pxy`` (K 2-12), the label skew's marginal differences and
the −1 entries of absent classes outweighing the concepts. The test-time choice reads inputs only, so it cannot tell
such concepts apart by construction: a test client goes to the cluster whose training clients' inputs look like
its own. The paper's other stages (descriptor privacy noise, the drift-time re-clustering of FLUX-dynamic) are not
part of this method. Communication: one model each way per trained client, plus the descriptors (float32) once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from sklearn.cluster import HDBSCAN

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.notes import note
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.data.federation import Split
from fedcluster.data.sharded import NotHeldError, ShardedSplit
from fedcluster.engine.evaluation.features import BodyFeatures
from fedcluster.engine.evaluation.scores import per_sample_losses
from fedcluster.engine.params import Params, repeat
from fedcluster.errors import ConfigError
from fedcluster.tiers.adaptation import InRound
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags, Reals, Weights, num_models

PAPER = ("Dario Fenoglio, Mohan Li, Pietro Barbiero, Nicholas D. Lane, Marc Langheinrich, Martin Gjoreski. FLUX: "
         "Efficient Descriptor-Driven Clustered Federated Learning under Arbitrary Distribution Shifts. Advances in "
         "Neural Information Processing Systems (NeurIPS) 38, 2025 (arXiv:2511.22305).")
LATE_SHARE = 0.8  # the code clusters once 80 % of the rounds are done, whatever the accuracy
ABSENT = -1.0  # the loss statistics of a class a client does not hold (the code's value)


@dataclass
class FLUXParams(RangeChecked):
    descriptors: Literal["px", "pxy"] = "px"  # px: feature statistics; pxy: and per-class losses (authors' Pxy)
    latent_dim: int | None = ranged(None, ">= 1")  # features projected to this many dimensions (null: not projected)
    min_cluster_size: int = ranged(2, ">= 2")  # HDBSCAN's smallest cluster (the authors' code: 2)
    min_samples: int | None = ranged(None, ">= 1")  # HDBSCAN's density neighbours (null: min_cluster_size)
    warmup: int = ranged(3, ">= 1")  # FedAvg rounds before the accuracy rule is checked (authors: 3)
    accuracy_delta: float = ranged(0.05, ">= 0")  # cluster once a round gains less accuracy than this
    cluster_round: int | None = ranged(None, ">= 0")  # the 0-based clustering round (null: the accuracy rule)


def scale_groups(desc: np.ndarray, widths: list[int], lo: np.ndarray | None = None,
                 hi: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min-max scaling of each group of columns (``widths``) by one minimum and maximum over all its entries, fitted
    on ``desc`` unless ``lo``/``hi`` are given → (scaled, lo, hi)."""
    edges = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    if lo is None or hi is None:
        lo = np.array([desc[:, a:b].min() if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:], strict=True)])
        hi = np.array([desc[:, a:b].max() if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:], strict=True)])
    out = np.zeros_like(desc, dtype=np.float64)
    for g, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        span = hi[g] - lo[g]
        out[:, a:b] = (desc[:, a:b] - lo[g]) / span if span > 0 else 0.0
    return out, lo, hi


def density_clusters(desc: np.ndarray, min_cluster_size: int, min_samples: int | None) -> np.ndarray:
    """HDBSCAN's clusters of the rows of ``desc``, each noise row a cluster of its own; labels 0..K−1 in order of
    first appearance."""
    if len(desc) < 2:
        return np.zeros(len(desc), dtype=np.int64)
    raw = HDBSCAN(min_cluster_size=min(min_cluster_size, len(desc)), min_samples=min_samples,
                  copy=True).fit_predict(desc)
    raw = raw.astype(np.int64)
    nxt = raw.max() + 1
    for i in np.flatnonzero(raw < 0):
        raw[i] = nxt
        nxt += 1
    _, labels = np.unique(raw, return_inverse=True)
    order = {old: new for new, old in enumerate(dict.fromkeys(labels.tolist()))}
    return np.array([order[v] for v in labels.tolist()], dtype=np.int64)


@ALGORITHMS.register("flux", "FLUX: FedAvg warm-up, client descriptors (feature statistics) clustered by HDBSCAN "
                     "(K unknown), FedAvg per cluster; unseen clients by their descriptor, without labels",
                     FLUXParams, paper=PAPER)
class FLUX(HardClusters):
    clustered = Saved[bool](Flags())
    ready = Saved[bool](Flags())  # the accuracy rule has fired: cluster at the next round
    trend = Saved[list[float]](Reals(low=0.0, high=1.0))  # the global model's validation accuracy per warm-up round
    descriptor_model = Saved[Params | None](Weights())  # θ of the clustering round: every descriptor's model
    scale_lo = Saved[np.ndarray | None](Reals())
    scale_hi = Saved[np.ndarray | None](Reals())
    centroids = Saved[np.ndarray | None](Reals(cluster_axis=0))  # [K, D] mean scaled descriptor of each cluster

    def __init__(self, ctx: Context, params: FLUXParams) -> None:
        super().__init__(ctx, params, k0=1, adaptation=InRound("FLUX's one density clustering of the descriptors"))
        if ctx.fed.task != "classification":
            raise ConfigError("flux describes clients by their per-class losses: it needs a classification data set; "
                              "use another method for regression")
        if isinstance(ctx.fed.train, ShardedSplit) and not ctx.fed.train.held.any():  # a server without the inputs
            raise NotHeldError("FLUX's descriptors are the clients' input statistics, computed where the inputs are")
        self.clustered = False
        self.ready = False  # the accuracy rule has fired: cluster at the next round
        self.trend = []  # the global model's validation accuracy after each warm-up round
        self.descriptor_model = None  # θ of the clustering round: every descriptor's model
        self.scale_lo = None
        self.scale_hi = None
        self.centroids = None  # [K, D] mean scaled descriptor of each cluster
        self._features = BodyFeatures(ctx.module)
        self._projection: torch.Tensor | None = None
        self._width: int | None = None
        if params.cluster_round is not None and params.cluster_round >= ctx.cfg.rounds:
            note(f"algorithm.cluster_round={params.cluster_round} is past the last round (rounds={ctx.cfg.rounds}): "
                 "FLUX never clusters and runs as FedAvg; give a smaller cluster_round or more rounds")

    # -- descriptors ---------------------------------------------------------------------------------------------
    @property
    def latent_dim(self) -> int:
        """The descriptor's feature dimensions: ``latent_dim``, or the features' own width."""
        if self._width is None:
            x = torch.zeros((1, *self.ctx.fed.input_shape), device=self.ctx.device)
            self._width = int(self._features({n: v[:1] for n, v in self.models.items()}, 0, x).shape[1])
        return self.params.latent_dim or self._width

    def widths(self, labelled: bool) -> list[int]:
        """Column widths of the descriptor's groups: [latent mean, latent std] (+ [loss mean, loss std] per class)."""
        d, c = self.latent_dim, self.ctx.fed.num_classes
        return [d, d, c, c] if labelled and self.params.descriptors == "pxy" else [d, d]

    def project(self, z: torch.Tensor) -> torch.Tensor:
        """The features [N, width] through the fixed random orthonormal map to ``latent_dim`` dimensions (seeded by
        the run's seed); unchanged without ``latent_dim``."""
        d = self.params.latent_dim
        if d is None:
            return z
        if self._projection is None:
            rng = np.random.default_rng([self.ctx.cfg.seed, 0xF1, z.shape[1]])
            q, _ = np.linalg.qr(rng.standard_normal((z.shape[1], max(z.shape[1], d))))
            cols = q[:, :d] if z.shape[1] >= d else np.eye(z.shape[1], d)
            self._projection = torch.as_tensor(np.ascontiguousarray(cols), dtype=torch.float32)
        return z @ self._projection.to(z.device)

    @torch.no_grad()
    def describe(self, split: Split, model: Params, labelled: bool) -> np.ndarray:
        """[clients, D] descriptors of every client of ``split`` under ``model`` [1, ...] (labels read only when
        ``labelled``)."""
        c = self.ctx.fed.num_classes
        out = np.zeros((split.num_clients, sum(self.widths(labelled))))
        for i in np.flatnonzero(split.sizes):
            x, y = split.client(int(i))
            p = self.project(self._features(model, 0, x)).double()
            row = [p.mean(0), p.std(0, correction=0)]
            if labelled and self.params.descriptors == "pxy":
                loss = per_sample_losses(self.outputs(x, model), y, "classification")[0].double()
                onehot = torch.nn.functional.one_hot(y.long(), c).double()  # [N, C]
                count = onehot.sum(0)
                mean = (onehot * loss[:, None]).sum(0) / count.clamp(min=1)
                var = (onehot * (loss[:, None] - mean) ** 2).sum(0) / count.clamp(min=1)
                absent = torch.full_like(mean, ABSENT)
                row += [torch.where(count > 0, mean, absent), torch.where(count > 0, var.sqrt(), absent)]
            out[i] = torch.cat(row).cpu().numpy()
        return out

    def validation_accuracy(self) -> float:
        """The global model's N_i-weighted accuracy on the clients' validation data (the code's warm-up signal)."""
        model = self.models

        def correct(part: Split) -> np.ndarray:  # each client's right answers, from its own rows
            hits = np.zeros(part.num_clients)
            for i in np.flatnonzero(part.sizes):
                x, y = part.client(int(i))
                hits[i] = float((self.outputs(x, model)[0].argmax(1) == y).sum())
            return hits

        val = self.ctx.fed.val
        hits = np.asarray(self.ctx.trainer.per_client(val, correct), dtype=np.float64)
        return float(hits.sum() / max(int(val.sizes.sum()), 1))

    # -- the round -------------------------------------------------------------------------------------------------
    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        p = self.params
        if not self.clustered and (round_ == p.cluster_round if p.cluster_round is not None else self.ready):
            return self.cluster_step(round_)
        pos = self.cluster[clients]
        local, _ = self.train(round_, clients, pos)
        self.fedavg(clients, local, pos)
        if not self.clustered and p.cluster_round is None:
            self.trend.append(self.validation_accuracy())
            gains = np.diff(self.trend)
            done = round_ + 1
            self.ready = bool(done >= p.warmup and (np.any(gains < p.accuracy_delta)
                                                     or done >= LATE_SHARE * self.ctx.cfg.rounds))
        payload = len(clients) * self.model_bytes()
        return RoundResult(payload, payload)

    def cluster_step(self, round_: int) -> RoundResult:
        """Steps 2-3: every client's descriptor under θ, HDBSCAN, then the round's updates averaged per cluster."""
        everyone = np.arange(self.ctx.fed.num_clients, dtype=np.int64)
        theta = {n: v.clone() for n, v in self.models.items()}
        raw = np.asarray(self.ctx.trainer.per_client(self.ctx.fed.train,
                                                     lambda part: self.describe(part, theta, True)))
        desc, self.scale_lo, self.scale_hi = scale_groups(raw, self.widths(True))
        labels = density_clusters(desc, self.params.min_cluster_size, self.params.min_samples)
        k = int(labels.max()) + 1
        local, _ = self.train(round_, everyone, np.zeros(len(everyone), dtype=np.int64))
        self.regroup(repeat({n: v[0] for n, v in theta.items()}, k), everyone, labels)
        self.fedavg(everyone, local, labels)
        self.centroids = np.stack([desc[labels == j].mean(0) for j in range(k)])
        self.descriptor_model = theta
        self.clustered = True
        payload = len(everyone) * self.model_bytes()
        return RoundResult(payload + raw.size * 4, payload)

    # -- test time -------------------------------------------------------------------------------------------------
    def test_clusters(self, split: Split) -> np.ndarray:
        """Step 5: each client of ``split``'s nearest centroid by its marginal descriptor (inputs only)."""
        assert self.descriptor_model is not None and self.centroids is not None
        assert self.scale_lo is not None and self.scale_hi is not None
        widths = self.widths(False)
        raw = self.describe(split, self.descriptor_model, labelled=False)
        desc, _, _ = scale_groups(raw, widths, self.scale_lo[:len(widths)], self.scale_hi[:len(widths)])
        marginal = self.centroids[:, :sum(widths)]
        return ((desc[:, None, :] - marginal[None]) ** 2).sum(2).argmin(1)

    @torch.no_grad()
    def prediction(self, split: Split, participating: bool) -> tuple[torch.Tensor, torch.Tensor | np.ndarray]:
        """Participating clients: their cluster's model; test clients: the cluster of their nearest centroid (before
        the clustering: the one global model)."""
        if participating or not self.clustered:
            return super().prediction(split, participating)
        return self.chosen_outputs(split, self.test_clusters(split))

    def state_problem(self, state: dict[str, Any], rounds: int) -> str | None:
        """Before its clustering round FLUX has one model."""
        if (problem := super().state_problem(state, rounds)) is not None:
            return problem
        if not state["clustered"] and num_models(state) != 1:
            return f"algorithm.clustered is false but the checkpoint has {num_models(state)} cluster models"
        return None
