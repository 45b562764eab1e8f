"""FedCCFA (Chen, Xue, Wang, Liu & Huang, "Classifier Clustering and Feature Alignment for Federated Learning under
Distributed Concept Drift", NeurIPS 2024): a shared feature extractor, per-client classifiers clustered class by
class, and feature anchors per class cluster.

The model is split into its feature extractor f_θ (``body``, shared by every client, aggregated by FedAvg) and its
classifier f_φ (``head``, a linear layer: one row φ^c = (w_c, b_c) per class c, kept by each client). One round
(FedCCFA paper Algorithm 1 and its Figure 2 overview) with the sampled clients S^t:

1. **balanced classifier** (the paper's balanced classifier training): each client i draws a class-balanced sample
   of its training data (s_i = min(``balanced_per_class`` = 5, its smallest class count) samples of each class it
   holds, drawn afresh each round) and trains a classifier φ̂_i on it, starting from the common initial classifier
   φ^0 on top of the received extractor θ^t (frozen): ``balanced_epochs`` epochs at ``balanced_lr``. Trained on
   balanced data and from a common start, φ̂_i reflects the client's conditional distribution P_i(Y|X) rather than
   its label distribution P_i(Y);
2. **local training** (decoupled, classifier first, as the paper's study of drift adaptation motivates): the client's
   own classifier φ_i (φ̂_i on its first round) is trained for ``clf_epochs`` epochs at ``clf_lr`` with θ^t frozen;
   then the extractor, from θ^t, for the run's ``local_epochs`` at the run's ``lr`` with φ_i frozen, on the loss

       ℓ_CE(f_φ_i(f_θ(x)), y) + λ_i ℓ_align,   ℓ_align = −log softmax_c(cos(f_θ(x), a_i^c) / τ)[y]

   (the paper's feature alignment: the contrastive alignment of the sample's feature with its class's anchor a_i^y
   against the other classes' anchors, temperature τ = ``temperature``), with the adaptive weight λ_i = H(P_i(Y)) /
   γ, the entropy of the client's label distribution over γ = ``gamma`` (the paper's adaptive feature alignment: a
   client with skewed labels aligns less; ``gamma=0``: the fixed weight ``lam``). Alignment starts in round
   ``align_from`` + 1, once anchors exist. Afterwards the client's local anchors are the per-class mean features of
   its training data under its trained extractor;
3. **server** (class-level classifier clustering and clustered feature anchors): θ^{t+1} = θ^t + η_g (Σ_i N_i θ_i /
   Σ_i N_i − θ^t) (FedAvg, η_g the run's ``global_lr``). For every class c separately, the balanced classifiers' rows
   φ̂_i^c are clustered: the distance of clients i and j is the average of |cos(φ̂_i^c, φ̂_z^c) − cos(φ̂_j^c,
   φ̂_z^c)| over the other sampled clients z (the authors' code's MADD; 1 − cos(φ̂_i^c, φ̂_j^c) when only two clients
   take part), and DBSCAN with radius ``eps`` and one point per core (min_samples = 1: the connected components of
   the graph of distances ≤ eps) groups them. In every group of two or more clients, the class-c rows of their
   trained classifiers φ_i^c are replaced by the group's average, and so are their class-c anchors (the clustered
   feature anchors); a client alone in its group keeps its own row and anchor. Averages are uniform
   (``weights=uniform``, the authors' default) or weighted by the clients' counts of class c (``weights=label``).

Clients of one concept agree on every class, so their rows are pooled; for a class whose label two concepts assign
differently, the clients split by concept, while a class every concept labels alike is pooled over all of them (the
point of clustering at class level). A participating client predicts with θ and its own classifier φ_i (θ and the
mean classifier until it is first sampled); a test client, which has no classifier, with θ and the training-size
weighted mean of the clients' classifiers. Communication: θ down with φ^0, the rows and the anchors; θ_i, φ̂_i, φ_i
and the anchors up. Extras: ``class_clusters``, the mean over classes of the number of groups of the round.

The authors' code (Chen-Junbao/FedCCFA, configs/FedCCFA.yaml) runs a CIFAR-10 CNN with ``balanced_epochs`` 5,
``balanced_lr`` 0.1, ``clf_epochs`` 1, ``clf_lr`` 0.1 and ``eps`` 0.1, momentum 0.9 and weight decay 1e-5 in every
phase (here the run's ``momentum`` and ``weight_decay``, a fresh momentum buffer for every phase, as their fresh
optimisers), its extractor steps at rep_lr 0.01 for rep_epochs 5 (here the run's ``lr`` and ``local_epochs``); γ =
20, τ = 0.1, alignment from round 21, uniform weights and 5 samples per class are theirs and the defaults here.
Departures: fedcluster runs default to momentum 0, and without momentum a step at η moves about as far as one at η/10
with momentum 0.9, so the defaults here are ``balanced_epochs=20 balanced_lr=1 clf_epochs=2 clf_lr=0.5 eps=0.3``: on a
digits federation of three label-swap concepts (12 clients, MLP; tests/algorithms/test_fedccfa.py) they recover every
class's groups on seeds 0-2 after 10 and after 15 rounds, where after 15 rounds the authors' epochs with the learning
rates scaled for momentum 0 (5 × 1.0 and 1 × 1.0, eps 0.1) leave some swapped classes at ARI 0.7-0.9 and split one or
two unchanged ones, and the authors' values as they are (momentum 0) pool every class. The balanced sample is drawn with
the run's seed (per round and client); two clients take the distance above (the code divides by zero there); only the
contrastive alignment is offered (the code's ``penalize=CL``, not its L2 variant).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from scipy.sparse.csgraph import connected_components
from torch import nn
from torch.func import functional_call, grad, vmap

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.personal import PersonalAlgorithm, chunks
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.engine.params import Params, num_bytes
from fedcluster.engine.training.batches import make_schedule
from fedcluster.errors import ConfigError
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Reals

PAPER = ("Junbao Chen, Jingfeng Xue, Yong Wang, Zhenyan Liu, Lu Huang. Classifier Clustering and Feature Alignment "
         "for Federated Learning under Distributed Concept Drift. Advances in Neural Information Processing Systems "
         "(NeurIPS), 2024.")
BALANCED, CLASSIFIER, EXTRACTOR = 3, 4, 5  # batch streams of the three local phases
ANCHOR_BATCH = 2048  # rows per forward pass when the local anchors are computed


@dataclass
class FedCCFAParams(RangeChecked):
    balanced_epochs: int = ranged(20, ">= 0")  # epochs of the balanced classifier (0: cluster the trained ones)
    balanced_lr: float = ranged(1.0, "> 0")  # its step size
    balanced_per_class: int = ranged(5, ">= 1")  # at most this many samples per class in the balanced sample
    clf_epochs: int = ranged(2, ">= 0")  # epochs of the client's classifier (extractor frozen) before the extractor's
    clf_lr: float = ranged(0.5, "> 0")  # their step size
    eps: float = ranged(0.3, ">= 0")  # DBSCAN radius on the class-level classifier distances
    gamma: float = ranged(20.0, ">= 0")  # λ_i = H(P_i(Y)) / γ, the adaptive alignment weight (0: the fixed lam)
    lam: float = ranged(0.0, ">= 0")  # the fixed alignment weight when gamma = 0
    temperature: float = ranged(0.1, "> 0")  # τ of the contrastive alignment
    align_from: int = ranged(20, ">= 0")  # rounds before the alignment starts (the authors' code: 20)
    weights: Literal["uniform", "label"] = "uniform"  # class-cluster averages: uniform or by the class's counts
    num_clusters: int = ranged(1, "== 1", "FedCCFA keeps one shared extractor")  # always 1: one shared extractor


def _sgd(p: Params, g: Params, buf: Params | None, lr: float, momentum: float, wd: float,
         active: torch.Tensor) -> tuple[Params, Params]:
    """One step of torch's SGD (weight decay added to the gradient, the buffer starting at the first gradient) for
    the units with ``active`` 1; the others keep their parameters and buffer."""
    out, nbuf = {}, {}
    for n, v in p.items():
        on = active.view(-1, *[1] * (v.dim() - 1)) > 0
        d = g[n] + wd * v if wd else g[n]
        b = d if buf is None or not momentum else torch.where(on, momentum * buf[n] + d, buf[n])
        nbuf[n] = b
        out[n] = torch.where(on, v - lr * (b if momentum else d), v)
    return out, nbuf


def madd(vectors: np.ndarray) -> np.ndarray:
    """[U, U] distances of the rows of ``vectors``: the mean over the other rows z of |cos(v_i, v_z) − cos(v_j,
    v_z)| (the FedCCFA authors' code's MADD), 1 − cos(v_i, v_j) for two rows."""
    u = len(vectors)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cos = unit @ unit.T
    if u <= 2:
        d = 1.0 - cos
    else:
        gap = np.abs(cos[:, None, :] - cos[None, :, :])  # [i, j, z]
        idx = np.arange(u)
        own = gap[:, :, idx].diagonal(axis1=0, axis2=2).T + gap[:, :, idx].diagonal(axis1=1, axis2=2)  # z = i, j
        d = (gap.sum(2) - own) / (u - 2)
    np.fill_diagonal(d, 0.0)
    return np.maximum((d + d.T) / 2, 0.0)


def dbscan_groups(dist: np.ndarray, eps: float) -> np.ndarray:
    """DBSCAN with min_samples = 1 on precomputed distances: every point is a core point, so the clusters are the
    connected components of the graph of pairs within ``eps`` (labels in order of first member)."""
    _, labels = connected_components(dist <= eps, directed=False)
    return labels.astype(np.int64)


@ALGORITHMS.register("fedccfa", "FedCCFA: shared extractor (FedAvg), class-level DBSCAN clustering of balanced "
                     "classifiers, per-cluster classifier rows and feature anchors with adaptive alignment",
                     FedCCFAParams, paper=PAPER)
class FedCCFA(PersonalAlgorithm):
    """FedCCFA paper Algorithm 1 (module docstring). ``personal`` holds the clients' classifiers (``head.*``);
    ``models`` the shared extractor with the mean classifier (what a test client predicts with)."""

    anchors = Saved[torch.Tensor](Reals(nan_ok=True))  # [M, C, D] the clients' feature anchors (NaN: none)

    def __init__(self, ctx: Context, params: FedCCFAParams) -> None:
        super().__init__(ctx, params)
        head = ctx.module.head
        if ctx.fed.task != "classification" or not isinstance(head, nn.Linear) \
                or head.out_features != ctx.fed.output_dim:
            raise ConfigError(f"algorithm=fedccfa clusters a linear classifier's class rows: it needs a "
                              f"classification task and a model whose head is one linear layer (model={ctx.cfg.model}"
                              f" on a {ctx.fed.task} task does not); use model=logistic, mlp, cnn or resnet18")
        m = ctx.fed.num_clients
        self.head_names = [n for n in self.models if n.startswith("head.")]
        self.body_names = [n for n in self.models if n.startswith("body.")]
        self.head0 = {n: self.models[n][0].clone() for n in self.head_names}  # φ^0, the balanced training's start
        self.personal = {n: self.models[n].expand(m, *self.models[n].shape[1:]).clone() for n in self.head_names}
        self.classes, self.dim = head.out_features, head.in_features
        self.anchors = torch.full((m, self.classes, self.dim), float("nan"), device=ctx.device)
        self.class_clusters = np.full((self.classes, m), -1, dtype=np.int64)  # the last round's groups (-1: absent)
        self._body_grad = vmap(grad(self._body_loss))

    # -- the round ---------------------------------------------------------------------------------------
    def run_round(self, round_: int, clients: np.ndarray) -> RoundResult:
        p = self.params
        clients = np.asarray(clients, dtype=np.int64)
        if not len(clients):
            return RoundResult(bytes_up=0, bytes_down=0, extra={"class_clusters": 0.0})
        theta = {n: self.models[n][0] for n in self.body_names}
        counts = self.label_counts(clients)  # [U, C]
        bodies: dict[str, list[torch.Tensor]] = {n: [] for n in self.body_names}
        balanced: dict[str, list[torch.Tensor]] = {n: [] for n in self.head_names}
        heads: dict[str, list[torch.Tensor]] = {n: [] for n in self.head_names}
        local_anchors = []
        lo = 0
        for part in chunks(clients):
            part_counts, lo = counts[lo:lo + len(part)], lo + len(part)
            idx = torch.as_tensor(part, device=self.ctx.device)
            start = {n: v.expand(len(part), *v.shape).clone() for n, v in self.head0.items()}
            if p.balanced_epochs > 0:  # 1. the balanced classifiers
                bal = self.train_heads(start, theta, self.balanced_batches(part, round_), p.balanced_lr)
            else:
                bal = start
            fresh = torch.as_tensor(~self.has_personal[part], device=self.ctx.device)
            own = {n: torch.where(fresh.view(-1, *[1] * (v.dim() - 1)), bal[n], self.personal[n][idx])
                   for n, v in bal.items()}
            own = self.train_heads(own, theta, self.batches(part, round_, CLASSIFIER, p.clf_epochs), p.clf_lr)
            body = self.train_bodies(theta, own, part, round_, part_counts)  # 2. the extractor
            local_anchors.append(self.local_anchors(body, part))
            for n in self.body_names:
                bodies[n].append(body[n])
            for n in self.head_names:
                balanced[n].append(bal[n] if p.balanced_epochs > 0 else own[n])
                heads[n].append(own[n])
        cat = lambda d: {n: torch.cat(v) for n, v in d.items()}  # noqa: E731
        trained, bal_heads, anchors = cat(heads), cat(balanced), torch.cat(local_anchors)
        # 3. the server: FedAvg of the extractors, class-level clustering of the classifiers and anchors
        if self.body_names:
            w = torch.as_tensor(self.ctx.fed.train.sizes[clients] / self.ctx.fed.train.sizes[clients].sum(),
                                dtype=torch.float64, device=self.ctx.device)
            for n, v in cat(bodies).items():
                mean = torch.einsum("m,m...->...", w, v.double())
                theta_n = theta[n].double()
                self.models[n] = (theta_n + self.ctx.cfg.global_lr * (mean - theta_n)).to(v.dtype).unsqueeze(0)
        groups = self.cluster_classes(bal_heads)  # [C, U]
        trained, anchors = self.aggregate(trained, anchors, groups, counts)
        idx = torch.as_tensor(clients, device=self.ctx.device)
        for n, v in trained.items():
            self.personal[n][idx] = v
        self.anchors[idx] = anchors
        self.has_personal[clients] = True
        self.class_clusters[:] = -1
        self.class_clusters[:, clients] = groups
        self.update_mean_head()
        model, head = self.model_bytes(), num_bytes(self.head0)
        anchor = self.classes * self.dim * self.anchors.element_size()
        up = model + head * (2 if p.balanced_epochs > 0 else 1) + anchor
        down = model + head + anchor
        return RoundResult(bytes_up=len(clients) * up, bytes_down=len(clients) * down,
                           extra={"class_clusters": float(np.mean([len(np.unique(g)) for g in groups]))})

    def label_counts(self, clients: np.ndarray) -> np.ndarray:
        """[U, C] the clients' current training label counts (a drift relabels them)."""
        train = self.ctx.fed.train
        y = train.y.cpu().numpy()
        return np.stack([np.bincount(y[train.ptr[c]:train.ptr[c + 1]], minlength=self.classes)[:self.classes]
                         for c in clients])

    # -- local phases ------------------------------------------------------------------------------------
    def batches(self, clients: np.ndarray, round_: int, stream: int, epochs: int, sizes: np.ndarray | None = None,
                table: np.ndarray | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The cohort's minibatches in lockstep (engine.training.batches' schedule): ([U, B] training rows, [U, B]
        mask, [U] active); ``sizes``/``table`` replace each client's rows by its ``table`` row's first sizes[c]."""
        train = self.ctx.fed.train
        solver = self.ctx.solver
        sched = make_schedule(train.sizes if sizes is None else sizes, clients, self.ctx.cfg.seed, round_, epochs,
                              solver.batch_size, stream)
        local = sched.local.numpy()
        if table is None:
            rows = local + train.ptr[clients].reshape(-1, 1, 1)
        else:
            rows = table[np.arange(len(clients)).reshape(-1, 1, 1), local]
        device = train.x.device
        rows_t, mask = torch.as_tensor(rows, device=device), sched.mask.to(device)
        for s in range(sched.num_steps if epochs > 0 else 0):
            yield rows_t[:, s], mask[:, s], torch.as_tensor(sched.steps > s, device=device, dtype=torch.float32)

    def balanced_batches(self, clients: np.ndarray, round_: int) -> Iterator[tuple[torch.Tensor, torch.Tensor,
                                                                                     torch.Tensor]]:
        """Batches over each client's class-balanced sample: min(balanced_per_class, smallest class count) rows of
        every class it holds, drawn without replacement (seeded by seed, round and client)."""
        train = self.ctx.fed.train
        y = train.y.cpu().numpy()
        picks = []
        for c in clients:
            lo, hi = int(train.ptr[c]), int(train.ptr[c + 1])
            labels = y[lo:hi]
            held = np.unique(labels)
            rng = np.random.default_rng([self.ctx.cfg.seed, 11, round_, int(c)])
            if len(held) == 0:
                picks.append(np.zeros(0, dtype=np.int64))
                continue
            s = min(int(np.bincount(labels)[held].min()), self.params.balanced_per_class)
            pick = np.concatenate([rng.choice(np.flatnonzero(labels == k), s, replace=False) for k in held])
            picks.append(lo + pick)
        sizes = np.zeros(self.ctx.fed.num_clients, dtype=np.int64)
        sizes[clients] = [len(q) for q in picks]
        table = np.zeros((len(clients), max(int(sizes.max()), 1)), dtype=np.int64)
        for u, q in enumerate(picks):
            table[u, :len(q)] = q
        return self.batches(clients, round_, BALANCED, self.params.balanced_epochs, sizes, table)

    def features(self, body: Params, x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.ctx.module.body, {n[5:]: v for n, v in body.items()}, (x,))

    def train_heads(self, head: Params, theta: Params, batches: Iterator[tuple[torch.Tensor, torch.Tensor,
                                                                                torch.Tensor]],
                    lr: float) -> Params:
        """SGD on the U classifiers [U, ...] over ``batches``, the extractor θ frozen (a fresh momentum buffer)."""
        cfg, train = self.ctx.cfg, self.ctx.fed.train
        buf = None
        for rows, mask, active in batches:
            u, b = rows.shape
            with torch.no_grad():
                z = self.features(theta, train.x[rows.reshape(-1)]).reshape(u, b, -1).float()
            h = {n: v.detach().requires_grad_() for n, v in head.items()}
            logits = torch.einsum("ubd,ucd->ubc", z, h["head.weight"])
            if "head.bias" in h:
                logits = logits + h["head.bias"][:, None, :]
            y = train.y[rows.reshape(-1)]
            loss = F.cross_entropy(logits.reshape(u * b, -1), y, reduction="none").reshape(u, b)
            total = ((loss * mask).sum(1) / mask.sum(1).clamp(min=1.0)).sum()
            g = dict(zip(h, torch.autograd.grad(total, list(h.values())), strict=True))
            with torch.no_grad():
                head, buf = _sgd(head, g, buf, lr, cfg.momentum, cfg.weight_decay, active)
        return {n: v.detach() for n, v in head.items()}

    def alignment_weights(self, counts: np.ndarray, round_: int) -> np.ndarray:
        """[U] λ_i = H(P_i(Y)) / γ (``gamma=0``: ``lam``); 0 before round ``align_from``."""
        p = self.params
        if round_ < p.align_from:
            return np.zeros(len(counts))
        if p.gamma == 0:
            return np.full(len(counts), p.lam)
        prob = counts / np.maximum(counts.sum(1, keepdims=True), 1)
        logp = np.log(np.where(prob > 0, prob, 1.0))
        return -(prob * logp).sum(1) / p.gamma

    def _body_loss(self, body: Params, head: Params, anchors: torch.Tensor, lam: torch.Tensor, x: torch.Tensor,
                   y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        z = self.features(body, x).float()
        out = F.linear(z, head["head.weight"], head.get("head.bias"))
        loss = F.cross_entropy(out, y, reduction="none")
        have = ~torch.isnan(anchors[:, 0])  # [C] the classes with an anchor
        cos = F.cosine_similarity(z[:, None, :], torch.nan_to_num(anchors)[None], dim=-1)  # [B, C]
        logits = torch.where(have[None], cos / self.params.temperature, torch.full_like(cos, -1e9))
        align = F.cross_entropy(logits, y, reduction="none") * have[y].to(loss.dtype)
        return ((loss + lam * align) * mask).sum() / mask.sum().clamp(min=1.0)

    def train_bodies(self, theta: Params, head: Params, clients: np.ndarray, round_: int,
                     counts: np.ndarray) -> Params:
        """[U, ...] each client's extractor trained from θ with its classifier frozen on ℓ_CE + λ_i ℓ_align."""
        body = {n: v.expand(len(clients), *v.shape).clone() for n, v in theta.items()}
        if not body:
            return body
        cfg, train = self.ctx.cfg, self.ctx.fed.train
        idx = torch.as_tensor(clients, device=self.ctx.device)
        anchors = self.anchors[idx]
        lam = torch.as_tensor(self.alignment_weights(counts, round_), dtype=torch.float32, device=self.ctx.device)
        lam = torch.where(torch.isnan(anchors[:, :, 0]).all(1), torch.zeros_like(lam), lam)
        buf = None
        for rows, mask, active in self.batches(clients, round_, EXTRACTOR, self.ctx.solver.epochs):
            g = self._body_grad(body, head, anchors, lam, train.x[rows], train.y[rows], mask)
            with torch.no_grad():
                body, buf = _sgd(body, g, buf, cfg.lr, cfg.momentum, cfg.weight_decay, active)
        return body

    def local_anchors(self, body: Params, clients: np.ndarray) -> torch.Tensor:
        """[U, C, D] each client's per-class mean feature of its training data under its extractor (NaN for a
        class it does not hold)."""
        train = self.ctx.fed.train
        out = torch.full((len(clients), self.classes, self.dim), float("nan"), device=self.ctx.device)
        with torch.no_grad():
            for u, c in enumerate(clients):
                one = {n: v[u] for n, v in body.items()} if body else {}
                sums = torch.zeros(self.classes, self.dim, dtype=torch.float64, device=self.ctx.device)
                n = torch.zeros(self.classes, dtype=torch.float64, device=self.ctx.device)
                for lo in range(int(train.ptr[c]), int(train.ptr[c + 1]), ANCHOR_BATCH):
                    hi = min(lo + ANCHOR_BATCH, int(train.ptr[c + 1]))
                    z = self.features(one, train.x[lo:hi]).double()
                    y = train.y[lo:hi]
                    sums.index_add_(0, y, z)
                    n.index_add_(0, y, torch.ones_like(y, dtype=torch.float64))
                have = n > 0
                out[u, have] = (sums[have] / n[have, None]).float()
        return out

    # -- the server ----------------------------------------------------------------------------------------
    def class_vectors(self, heads: Params, c: int) -> np.ndarray:
        """[U, D (+1)] the class-c rows (w_c, b_c) of the U classifiers."""
        parts = [heads["head.weight"][:, c]] + ([heads["head.bias"][:, c, None]] if "head.bias" in heads else [])
        return torch.cat(parts, 1).double().cpu().numpy()

    def cluster_classes(self, heads: Params) -> np.ndarray:
        """[C, U] each class's DBSCAN groups of the U clients (MADD distances of their class rows)."""
        u = len(heads["head.weight"])
        if u == 1:
            return np.zeros((self.classes, 1), dtype=np.int64)
        return np.stack([dbscan_groups(madd(self.class_vectors(heads, c)), self.params.eps)
                         for c in range(self.classes)])

    def aggregate(self, heads: Params, anchors: torch.Tensor, groups: np.ndarray,
                  counts: np.ndarray) -> tuple[Params, torch.Tensor]:
        """Every group of two or more clients takes its average class row and class anchor."""
        heads = {n: v.clone() for n, v in heads.items()}
        anchors = anchors.clone()
        dev = self.ctx.device
        for c in range(self.classes):
            for g in np.unique(groups[c]):
                members = np.flatnonzero(groups[c] == g)
                if len(members) < 2:
                    continue
                idx = torch.as_tensor(members, device=dev)
                weight = counts[members, c].astype(np.float64) if self.params.weights == "label" \
                    else np.ones(len(members))
                if weight.sum() == 0:
                    weight = np.ones(len(members))
                w = torch.as_tensor(weight / weight.sum(), device=dev)
                for v in heads.values():
                    v[idx, c] = torch.einsum("m,m...->...", w, v[idx, c].double()).to(v.dtype)
                have = ~torch.isnan(anchors[idx, c, 0])
                aw = w * have.double() * torch.as_tensor(counts[members, c] > 0, device=dev).double() \
                    if self.params.weights == "label" else w * have.double()
                if float(aw.sum()) > 0:
                    mean = torch.einsum("m,md->d", aw / aw.sum(), torch.nan_to_num(anchors[idx, c]).double())
                    anchors[idx, c] = mean.float()
        return heads, anchors

    def update_mean_head(self) -> None:
        """The classifier of ``models`` (a test client's): the training-size weighted mean of the clients'
        classifiers."""
        seen = np.flatnonzero(self.has_personal)
        if not len(seen):
            return
        sizes = self.ctx.fed.train.sizes[seen].astype(np.float64)
        w = torch.as_tensor(sizes / max(sizes.sum(), 1.0), dtype=torch.float64, device=self.ctx.device)
        idx = torch.as_tensor(seen, device=self.ctx.device)
        for n in self.head_names:
            v = self.personal[n]
            self.models[n] = torch.einsum("m,m...->...", w, v[idx].double()).to(v.dtype).unsqueeze(0)

    # -- evaluation ----------------------------------------------------------------------------------------
    def personal_for_prediction(self) -> Params:
        """[M, ...] each client's model: the shared extractor and its own classifier."""
        m = self.ctx.fed.num_clients
        out = {n: self.models[n].expand(m, *self.models[n].shape[1:]) for n in self.body_names}
        return {**out, **self.personal}

