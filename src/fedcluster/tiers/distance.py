"""Tier 4 — client distance metrics that drive the adaptive procedure (HCFL paper Sec. 3.1 / 4.4, App. D,
A.2, A.6, E.1-4/5).

Every function is pure and returns an [n, n] symmetric matrix over the n clients it is given (rows of
the inputs), distances ≥ 0 with a zero diagonal unless said otherwise.

* ``update-cosine`` (CFL, Sattler et al.; StoCFL; ICFL): cosine similarity of the flattened updates Δθ_i,
  distance 1 − cos (Sattler's ``pairwise_angles`` adds 1e-12 to the norm product; so does this).
* ``parameter-l2`` (FeSEM, HCFL paper footnote 6): ‖θ_i − θ_j‖₂ between parameter vectors.
* ``gradient-profile`` (CFL-GP, CFL-GP paper Sec. 3): Euclidean distance between accumulated gradient profiles.
* ``prototype-ascp`` / ``prototype-cscp`` (HCFL+, HCFL paper eq. 9–12 and App. D eq. 240–245, practical form):
  class prototypes P_{c,i} (eq. 11) and the mean prototype P_{lf,i} (eq. 12) of the features z = g(x; φ);
  d̃_c = max over classes of Dist(P_{c,i}, P_{c,j}) (E.1-4: max over y), d̃_lf = Dist(P_{lf,i}, P_{lf,j}),
  Dist = 1 − cos (E.1-5); ASCP d̃ = max{d̃_c, d̃_lf}, CSCP d̃ = d̃_c (eq. 9). reference code stores prototypes as
  (C+1) × d rows (C class rows + the mean row), skips classes absent at either client, takes ASCP as the
  max over all C+1 rows and CSCP over the C class rows — the layout used here. E_{D_i}[L̃_k] is replaced
  by ω̃_{i;k} (HCFL paper "approximation in practice"): D^k_{ij} = d̃(i, j) · ω̃_{i;k} · ω̃_{j;k}
  (:func:`confidence_weighted`). The HCFL paper Table 2 ablations are ``reduce="mean"`` (mean instead of max
  inside eq. 9) and skipping :func:`confidence_weighted` (without the confidence term).
* ``principal-angle`` (PACFL, Vahidian et al. 2023/A.7): per client the top left singular
  vectors of each class's data matrix (:func:`data_signature`), and the angle between client subspaces
  (:func:`subspace_angles`), in degrees.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
import torch

Principle = Literal["ascp", "cscp"]
Reduce = Literal["max", "mean"]
DISTANCES: tuple[str, ...] = ("update-cosine", "parameter-l2", "gradient-profile", "prototype-ascp",
                              "prototype-cscp", "principal-angle")
_EPS = 1e-12


def _rows(x: torch.Tensor | np.ndarray) -> torch.Tensor:
    t = torch.as_tensor(x)
    return (t.flatten(1) if t.dim() > 1 else t.unsqueeze(1)).double()


# -- update / parameter / profile distances ------------------------------------------------------
def cosine_similarity(x: torch.Tensor | np.ndarray) -> np.ndarray:
    """[n, n] cos(x_i, x_j) = x_i·x_j / (‖x_i‖‖x_j‖ + 1e-12) of the flattened rows of ``x`` [n, ...]
    (CFL's similarity of updates Δθ_i, Sattler et al. /; StoCFL and ICFL use the same)."""
    v = _rows(x)
    norms = v.norm(dim=1)
    return ((v @ v.T) / (norms[:, None] * norms[None, :] + _EPS)).cpu().numpy()


def cosine_distance(x: torch.Tensor | np.ndarray) -> np.ndarray:
    """[n, n] 1 − cos(x_i, x_j) ∈ [0, 2] with an exact zero diagonal (tier 4 of CFL, HCFL paper Sec. 3.1)."""
    d = 1.0 - cosine_similarity(x)
    np.fill_diagonal(d, 0.0)
    return np.maximum(d, 0.0)


def parameter_distance(x: torch.Tensor | np.ndarray) -> np.ndarray:
    """[n, n] ‖x_i − x_j‖₂ between flattened parameter vectors (FeSEM's metric, HCFL paper footnote 6)."""
    v = _rows(x)
    return torch.cdist(v, v).cpu().numpy()


# -- HCFL+ prototypes (HCFL paper eq. 9–12) -----------------------------------------------------------------
def client_prototypes(features: torch.Tensor, labels: torch.Tensor | np.ndarray, owner: np.ndarray, m: int,
                      num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prototypes of ``m`` clients from their features z = g(x; φ) stored back to back.

    Returns ``P`` [m, C+1, d] — row c < C is P_{c,i} = (1/N_{i,c}) Σ_j 1{y_ij = c} z_ij (HCFL paper eq. 11), row C is
    P_{lf,i} = (1/N_i) Σ_j z_ij (eq. 12) — and ``counts`` [m, C+1] (N_{i,c} and N_i; a zero count marks an
    absent class, whose row is 0). ``owner`` [N] gives each row's client 0..m−1.
    """
    z = torch.as_tensor(features).reshape(len(features), -1).double()
    y = torch.as_tensor(labels, dtype=torch.long, device=z.device)  # on the features' device
    own = torch.as_tensor(owner, dtype=torch.long, device=z.device)
    rows = num_classes + 1
    sums = z.new_zeros(m * rows, z.shape[1])
    counts = z.new_zeros(m * rows)
    for slot in (own * rows + y, own * rows + num_classes):
        sums.index_add_(0, slot, z)
        counts.index_add_(0, slot, z.new_ones(len(z)))
    protos = sums / counts.clamp_min(1.0)[:, None]
    return protos.view(m, rows, -1), counts.view(m, rows)


def prototype_distance(prototypes: torch.Tensor, counts: torch.Tensor, principle: Principle = "cscp",
                       reduce: Reduce = "max") -> np.ndarray:
    """[m, m] d̃(i, j) of HCFL paper eq. 9–10 (practical form) from :func:`client_prototypes`.

    Per prototype row r, Dist_r(i, j) = 1 − cos(P_{r,i}, P_{r,j}) (E.1-5), used only when both clients
    have samples for r. CSCP: d̃ = max_{c ≤ C} Dist_c = d̃_c (eq. 9 second case, max over y per E.1-4);
    ASCP: d̃ = max{d̃_c, d̃_lf} = max over the C+1 rows (eq. 9 first case). ``reduce="mean"`` is HCFL paper Table 2's
    ablation ③ (mean over the valid rows instead of the max). Pairs without a common row get 0.
    """
    p = torch.as_tensor(prototypes).double()
    c = torch.as_tensor(counts).double()
    if principle == "cscp":
        p, c = p[:, :-1], c[:, :-1]
    elif principle != "ascp":
        raise ValueError(f"unknown principle {principle!r}; choose ascp or cscp")
    unit = p / p.norm(dim=-1, keepdim=True).clamp_min(_EPS)
    dist = (1.0 - torch.einsum("ird,jrd->ijr", unit, unit)).clamp_min(0.0)  # [m, m, rows]
    valid = (c[:, None, :] > 0) & (c[None, :, :] > 0)
    dist = torch.where(valid, dist, torch.zeros_like(dist))
    if reduce == "max":
        out = dist.amax(-1)
    elif reduce == "mean":
        out = dist.sum(-1) / valid.sum(-1).clamp_min(1)
    else:
        raise ValueError(f"unknown reduce {reduce!r}; choose max or mean")
    matrix = out.cpu().numpy()
    np.fill_diagonal(matrix, 0.0)
    return matrix


def confidence_weighted(distance: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """D^k_{ij} = d̃(i, j) · ω̃_{i;k} · ω̃_{j;k}: eq. 9 with E_{D_i}[L̃_k] replaced by ω̃_{i;k} (HCFL paper's practical
    approximation). ``weight`` [n] is column k of ω̃ for the n clients of ``distance``."""
    w = np.asarray(weight, dtype=np.float64)
    return np.asarray(distance, dtype=np.float64) * w[:, None] * w[None, :]


def cluster_matrices(distance: np.ndarray, omega_tilde: np.ndarray, weighted: bool = True
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """HCFL paper Alg. 2 line 20 with E.1-7: for each cluster k the rows ``members[k]`` (clients of ``distance`` whose
    argmax_k ω̃_{i;k} = k) and D_k = D^k restricted to them (confidence-weighted unless ``weighted=False``).
    ``omega_tilde`` [n, K] are the same clients' weights."""
    w = np.asarray(omega_tilde, dtype=np.float64)
    owner = w.argmax(1)
    members, mats = [], []
    for k in range(w.shape[1]):
        idx = np.flatnonzero(owner == k)
        d = np.asarray(distance)[np.ix_(idx, idx)]
        members.append(idx)
        mats.append(confidence_weighted(d, w[idx, k]) if weighted else d.astype(np.float64))
    return members, mats


# -- PACFL principal angles --------------------------------------------------------------------------
def data_signature(x: torch.Tensor | np.ndarray, y: torch.Tensor | np.ndarray, n_basis: int) -> np.ndarray:
    """PACFL's client signature U_i [d, Σ_c r_c]: for every class c present, the top ``n_basis`` left singular
    vectors of the data matrix [d, N_{i,c}] whose columns are the flattened samples, side by side (Vahidian et
    al. 2023, Sec. 3; reference code MMorafah/PACFL ``main_pacfl.py``: per-label truncated SVD, n_basis = 3)."""
    xs = x.double().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)
    xs = xs.reshape(len(x), -1)
    ys = y.cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    parts = []
    for c in np.unique(ys):
        u, _, _ = np.linalg.svd(xs[ys == c].T, full_matrices=False)
        parts.append(u[:, :n_basis])
    return np.hstack(parts) if parts else np.zeros((xs.shape[1], 0))


def subspace_angles(signatures: list[np.ndarray], measure: Literal["entry-min", "principal"] = "entry-min"
                    ) -> np.ndarray:
    """[n, n] PACFL proximity A_ij in degrees between client subspaces.

    ``principal``: the smallest principal angle arccos σ_max(Q_iᵀ Q_j) between the spans (Q = orthonormal
    basis of U). ``entry-min`` (reference code ``calculating_adjacency``, what PACFL's thresholds ν are tuned on):
    min over basis-vector pairs of arccos(clip(u_aᵀ v_b, −1, 1)) — signed, not a principal angle.
    """
    n = len(signatures)
    out = np.zeros((n, n))
    if measure == "principal":
        q = [np.linalg.qr(u)[0] if u.size else u for u in signatures]
        for i in range(n):
            for j in range(i + 1, n):
                s = np.linalg.svd(q[i].T @ q[j], compute_uv=False) if q[i].size and q[j].size else np.zeros(1)
                out[i, j] = out[j, i] = np.degrees(np.arccos(np.clip(s.max(initial=0.0), -1.0, 1.0)))
        return out
    if measure != "entry-min":
        raise ValueError(f"unknown measure {measure!r}; choose entry-min or principal")
    widths = [u.shape[1] for u in signatures]
    if min(widths, default=0) == 0:
        raise ValueError("every client needs at least one basis vector")
    allu = np.hstack(signatures)
    gram = np.clip(allu.T @ allu, -1.0, 1.0)
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    block_max = np.maximum.reduceat(np.maximum.reduceat(gram, starts, axis=0), starts, axis=1)
    out = np.degrees(np.arccos(block_max))  # arccos is decreasing: min angle = arccos of the max entry
    return (out + out.T) / 2


# -- the tier-4 parts a method holds ------------------------------------------------------------
class CohortView(Protocol):
    """What a distance part may ask of the round (the method computes it where the clients' data are)."""

    def own_updates(self, names: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """{name: [m, ...]} each client's change θ_{k,i} − θ_k^t of its own cluster's model (``names``: all)."""

    def updates(self) -> torch.Tensor:
        """[m, P] the flattened :meth:`own_updates`."""

    def prototypes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """P_i [m, C+1, d] and their counts [m, C+1] (eq. 11–12), computed with φ^t."""


class ClientDistance(ABC):
    """Tier 4: the [m, m] distance d̃ between the cohort's clients."""

    needs_labels: ClassVar[bool] = False  # computed from class labels (classification only)

    @abstractmethod
    def matrix(self, view: CohortView) -> np.ndarray: ...


class UpdateCosine(ClientDistance):
    """1 − cos(Δθ_i, Δθ_j) (CFL; HCFL paper Table 2 ablation ①)."""

    def matrix(self, view: CohortView) -> np.ndarray:
        return cosine_distance(view.updates())


class ParameterL2(ClientDistance):
    """‖Δθ_i − Δθ_j‖₂ (= ‖θ_i − θ_j‖₂ between clients of one cluster)."""

    def matrix(self, view: CohortView) -> np.ndarray:
        return parameter_distance(view.updates())


@dataclass(frozen=True)
class PrototypeDistance(ClientDistance):
    """HCFL paper eq. 9–12 on the clients' class prototypes (ASCP or CSCP, max or mean)."""

    principle: Principle = "ascp"
    reduce: Reduce = "max"
    needs_labels: ClassVar[bool] = True

    def matrix(self, view: CohortView) -> np.ndarray:
        protos, counts = view.prototypes()
        return prototype_distance(protos, counts, self.principle, self.reduce)


@dataclass(frozen=True)
class HeadUpdateDistance(PrototypeDistance):
    """Eq. 9-10 with the prototype rows replaced by the rows of each client's head update (the HCFL paper's public
    code, github.com/LINs-lab/HCFL, computes the distance on client updates): row c is the change of class c's
    output weights and bias, the last row their mean (ASCP's P_lf)."""

    def matrix(self, view: CohortView) -> np.ndarray:
        protos, counts = head_update_rows(view.own_updates(("head.weight", "head.bias")))
        return prototype_distance(protos, counts, self.principle, self.reduce)


def head_update_rows(delta: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """[m, C+1, d+1] rows (class c's weight and bias change, then their mean) and their counts (all one)."""
    parts = [v if v.dim() == 3 else v.unsqueeze(-1) for v in (delta["head.weight"], delta["head.bias"])]
    per_class = torch.cat(parts, -1)  # [m, C, d + 1]
    protos = torch.cat([per_class, per_class.mean(1, keepdim=True)], 1)
    return protos, torch.ones(protos.shape[:2], dtype=torch.float64, device=protos.device)


def _prototype(principle: Principle, p: Any) -> ClientDistance:
    return (HeadUpdateDistance if p.prototypes == "head-update" else PrototypeDistance)(principle, p.reduce)


# the ``distance`` names of algorithm=hcfl → the part, from the method's parameters (``reduce``, ``prototypes``)
DISTANCE_PARTS: dict[str, Callable[[Any], ClientDistance]] = {
    "prototype-ascp": lambda p: _prototype("ascp", p),
    "prototype-cscp": lambda p: _prototype("cscp", p),
    "update-cosine": lambda p: UpdateCosine(),
    "parameter-l2": lambda p: ParameterL2(),
}
