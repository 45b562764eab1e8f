"""PACFL (Vahidian et al. 2023, "Efficient Distribution Similarity Identification in Clustered Federated
Learning via Principal Angles Between Client Data Subspaces"/A.7, CFL-GP paper App. F.3).

Implements the one-shot clustering of the original's algorithm (not in the seeds; its steps as
"PACFL" gives them) with the formulas of the authors' code (reference code MMorafah/PACFL ``main_pacfl.py``:
signatures; ``src/clustering/hierarchical_clustering.py``: ``calculating_adjacency`` and
``hierarchical_clustering``):

1. in the first round every client (all M, not only the cohort) sends its signature U_i: for each class it
   holds, the top ``n_basis`` left singular vectors of its training-data matrix [d, N_{i,c}] (truncated SVD;
   :func:`~fedcluster.tiers.distance.data_signature`), taken on the inputs as stored — the run's input
   standardisation (``normalize``) is undone first, as the reference code takes the SVD of the raw pixels and a
   shift by mean_c moves the subspaces (measured in docs/fidelity.md: the angles grow by ≈ 1.5× and ν = 4.9
   no longer separates rotated Fashion-MNIST);
2. the server forms the proximity matrix A of angles between client subspaces in degrees
   (:func:`~fedcluster.tiers.distance.subspace_angles`, :meth:`PACFL.proximity`) and clusters it
   hierarchically, merging while the closest clusters are ≤ ν (:func:`~fedcluster.tiers.regrouping.threshold_clusters`;
   larger ν → fewer clusters);
3. every cluster starts from θ^0 and runs FedAvg among its members for all rounds (the first included).

Defaults follow the authors' code (``scripts/pacfl.sh``): n_basis = 3, average linkage as the code computes
it, ν = 4.9, and the ``entry-min`` angle of ``calculating_adjacency`` (CFL-GP paper F.3 tunes ν ∈ {…, 4, 5, …} with it).
The authors' per-label basis budget for Dirichlet label skew is not used.

What the angle sees (docs/fidelity.md, ``benchmarks/investigations/cfl_baselines_probe.py``): on raw, non-negative
images the entry-min angle is attained by the first singular vectors (≈ the class-mean directions; on digits
n_basis = 1 and 3 give the same matrix), so PACFL separates clients whose class means differ — rotations,
disjoint label sets — and cannot see concepts that only permute labels. ν is in degrees of an angle whose
within-group spread comes from sampling noise: on 8×8 digits with ≈ 13 samples per class and client it is
4–9°, above the reference ν = 4.9, and ν ≈ 10 separates rotations 0°/180° (across 8–18°). The
``principal`` measure on per-class signatures (30 vectors) is ≈ 0 there: two 30-dimensional spans inside
the ≈ 50 directions that carry digits' variance intersect.
Communication: the signatures (float32) go up once; then one model each way per sampled client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedcluster.algorithms.base import Context, RoundResult
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.data.federation import Split
from fedcluster.data.normalize import destandardize
from fedcluster.engine.params import repeat
from fedcluster.tiers.distance import data_signature, subspace_angles
from fedcluster.tiers.regrouping import ThresholdGroups
from fedcluster.tiers.saved_fields import Saved
from fedcluster.tiers.saved_kinds import Flags

PAPER = ("Saeed Vahidian, Mahdi Morafah, Weijia Wang, Vyacheslav Kungurtsev, Chen Chen, Mubarak Shah, Bill Lin. "
         "Efficient Distribution Similarity Identification in Clustered Federated Learning via Principal Angles "
         "between Client Data Subspaces. Proceedings of the AAAI Conference on Artificial Intelligence 37, 2023.")


@dataclass
class PACFLParams(RangeChecked):
    nu: float = ranged(4.9, ">= 0")  # ν: merge threshold on the subspace angle, degrees
    n_basis: int = ranged(3, ">= 1")  # singular vectors per class
    linkage: Literal["average", "complete", "single"] = "average"  # hierarchical-clustering linkage
    # principal ≈ 0 when the signatures' columns nearly span the input space (per-class signatures of 8×8 digits)
    measure: Literal["entry-min", "principal"] = "entry-min"  # angle: smallest entry (code) / principal


@ALGORITHMS.register("pacfl", "PACFL: one-shot clustering of data-subspace signatures (angle threshold ν), "
                     "then FedAvg per cluster", PACFLParams, paper=PAPER)
class PACFL(HardClusters):
    adaptation: ThresholdGroups
    clustered = Saved[bool](Flags())

    def __init__(self, ctx: Context, params: PACFLParams) -> None:
        super().__init__(ctx, params, k0=1, adaptation=ThresholdGroups(params.nu, params.linkage))
        self.clustered = False

    def signatures(self) -> list[np.ndarray]:
        """Step 1: every client's U_i, on its inputs as stored (the run's standardisation undone)."""
        fed, n_basis, tr = self.ctx.fed, self.params.n_basis, self.ctx.fed.train
        stats = fed.info.get("normalization")
        d, y = int(np.prod(fed.input_shape)), tr.y.cpu().numpy()
        # U_i's columns: min(n_basis, N_{i,c}, d) per class present, known from the labels alone
        widths = [sum(min(n_basis, int(n), d) for n in np.unique(y[lo:hi], return_counts=True)[1])
                  for lo, hi in zip(tr.ptr[:-1], tr.ptr[1:], strict=True)]

        def flat_signatures(part: Split) -> np.ndarray:  # each client's U_i from its own data, flattened
            out = np.zeros((part.num_clients, d * max(widths, default=0)))
            for i in np.flatnonzero(part.sizes):
                u = data_signature(destandardize(part.client(int(i))[0], stats), part.client(int(i))[1], n_basis)
                out[i, :u.size] = u.ravel()
            return out

        flat = np.asarray(self.ctx.trainer.per_client(tr, flat_signatures))
        return [flat[i, :d * w].reshape(d, w) for i, w in enumerate(widths)]

    def proximity(self, signatures: list[np.ndarray] | None = None) -> np.ndarray:
        """Step 2's proximity matrix A [M, M] of angles in degrees between the clients' subspaces."""
        return subspace_angles(self.signatures() if signatures is None else signatures, self.params.measure)

    def cluster_clients(self) -> int:
        """Steps 1–2; returns the bytes of the uploaded signatures."""
        sigs = self.signatures()
        labels = self.adaptation.groups(self.proximity(sigs))
        k = int(labels.max()) + 1
        self.regroup(repeat({n: v[0] for n, v in self.models.items()}, k), np.arange(len(labels)), labels)
        self.sync()
        self.clustered = True
        return sum(s.size for s in sigs) * 4

    def step(self, round_: int, clients: np.ndarray) -> RoundResult:
        up = self.cluster_clients() if not self.clustered else 0
        pos = self.cluster[clients]
        local, _ = self.train(round_, clients, pos)
        self.fedavg(clients, local, pos)
        payload = len(clients) * self.model_bytes()
        return RoundResult(bytes_up=payload + up, bytes_down=payload)
