"""Clients mixing two distributions (CFL-GP paper §5.2 "Extension to mixture distributions", App. F.5.2).

Three equal disjoint subsets of the training set: A rotated ``angles[0]`` (0°), B rotated ``angles[1]``
(180°), and C whose samples are each rotated ``angles[0]`` with ratio κ and ``angles[1]`` with 1 − κ;
each subset is shared by a third of the clients (CFL-GP paper: 12 clients, 4 per subset). Ground truth:
``true_cluster`` 0 = A, 1 = B, 2 = mixture; ``sample_concept`` = source of every
training sample (0 = ``angles[0]``, 1 = ``angles[1]``). One test client per pure distribution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, Transform, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.common import (
    check_data,
    full_test,
    grouped_partition,
    resize_plans,
    scenario_info,
)
from fedcluster.data.scenarios.rotation import angle_name, rotator
from fedcluster.data.scenarios.shared_params import LocalData, PartLabelSplit
from fedcluster.data.shifts.assignment import balanced_assignment
from fedcluster.data.shifts.geometric import rotate
from fedcluster.data.shifts.mixture import mix_two
from fedcluster.data.sources.base import ArrayDataset


def _mixed_rotator(source: np.ndarray, angles: list[float]) -> Transform:
    """Rotate sample j by ``angles[source[j]]``."""

    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(x.shape, dtype=np.float32)
        for s, a in enumerate(angles):
            out[source == s] = rotate(x[source == s], a)
        return out

    return apply


@dataclass
class MixtureParams(LocalData, PartLabelSplit):
    """``kappa``: share of the mixture clients' samples from ``angles[0]`` (CFL-GP paper sweeps 0.1..0.9). ``exact``:
    exactly round(κ·n) samples per client (default) or a Binomial(n, κ) count, as CFL-GP paper words it ("each sample
    ... with probabilities κ and 1 − κ")."""

    kappa: float = 0.5  # κ: share of the mixture clients' samples from angles[0]
    angles: list[float] = field(default_factory=lambda: [0.0, 180.0])  # rotation of source A and source B (degrees)
    exact: bool = True  # exactly round(κ·n) samples from A per client (false: Binomial(n, κ))
    val_fraction: float = 0.3

    def check(self) -> None:
        if not 0 <= self.kappa <= 1:
            raise ValueError(f"kappa must be in [0, 1], got {self.kappa}")
        if len(self.angles) != 2 or self.angles[0] % 360 == self.angles[1] % 360:
            raise ValueError(f"angles must be two different rotations, got {self.angles}")


@SCENARIOS.register("mixture", "CFL-GP paper §5.2 mixture: clients of A (0°), B (180°) and C (each sample 0° with "
                    "ratio κ, else 180°)", MixtureParams)
def mixture(data: ArrayDataset | None, num_clients: int, params: MixtureParams, rng: np.random.Generator
            ) -> Federation:
    data = check_data(data, "mixture")
    if num_clients < 3:
        raise ValueError(f"the mixture scenario needs at least 3 clients (A, B, mixture), got {num_clients}")
    group = balanced_assignment(num_clients, 3, rng)
    parts = grouped_partition(data.y_train, group, 3, params.split, params.alpha, params.classes_per_client, rng)
    clients: list[ClientPlan] = []
    for idx, g in zip(parts, group, strict=True):
        if g < 2:
            clients.append(ClientPlan(idx, int(g), None, rotator(params.angles[g]), int(g)))
            continue
        n = len(idx)
        n_a = int(round(params.kappa * n)) if params.exact else int(rng.binomial(n, params.kappa))
        pool = rng.permutation(idx)
        mixed, source = mix_two(pool[:n_a], pool[n_a:], n_a / n if n else 0.0, n, rng)
        clients.append(ClientPlan(mixed, 2, None, _mixed_rotator(source, params.angles), 2, sample_concept=source))
    tests = [full_test(data, g, None, rotator(params.angles[g]), g) for g in range(2)]
    resize_plans(clients + tests, params.image_size)
    names = [angle_name(a) for a in params.angles] + [f"mix{params.kappa:g}"]
    return assemble(data, clients, tests, params.val_fraction, rng, scenario_info("mixture", data, params), names)
