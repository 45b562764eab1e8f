"""Rotated-image clusters (CFL-GP paper §5.2 / App. F.5; FedMD paper §V-D; CFL-GP paper App. F.8).

The training pool is cut into one disjoint equal part per angle; part r is rotated by ``angles[r]`` and
shared by the clients of that angle (equal numbers of clients per angle). Ground truth groups nearby
angles: by default by quadrant, which puts the CFL-GP paper's {0,15}, {90,105}, {180,195}, {270,275} together and keeps
0/90/180/270 apart; ``groups`` gives the grouping explicitly, ``group_by=angle`` makes every angle a cluster.
Each participating client keeps 30% of its data for local testing (CFL-GP paper: 70/30). There is one
non-participating test client per angle (the official test set rotated by it, FedMD paper §V-D) labelled with
its angle's cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
    subsample,
)
from fedcluster.data.scenarios.shared_params import LocalData, PartLabelSplit
from fedcluster.data.shifts.assignment import balanced_assignment
from fedcluster.data.shifts.geometric import ROTATED_MNIST_ANGLES, rotate, rotation_clusters
from fedcluster.data.sources.base import ArrayDataset


def rotator(angle: float) -> Transform:
    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return rotate(x, angle)

    return apply


def angle_name(angle: float) -> str:
    return f"rot{angle:g}"


@dataclass
class RotationParams(LocalData, PartLabelSplit):
    """``angles``: one rotation per part (default the CFL-GP paper's eight; FedMD paper/IFCA: [0,90,180,270]; CFL-GP
    paper EMNIST:
    [0,180]). ``split``/``alpha``/``classes_per_client``: label shift inside each part (CFL-GP paper App. F.8:
    dirichlet,
    α = 1). ``samples``: random subset of the training set (CFL-GP paper App. F.8: 200,000). ``image_size``: 14 for
    the FedMD paper's 14×14 MNIST."""

    angles: list[float] = field(default_factory=lambda: [float(a) for a in ROTATED_MNIST_ANGLES])  # degrees
    group_by: Literal["quadrant", "angle"] = "quadrant"  # true clusters: nearby angles / each angle
    groups: list[list[float]] | None = None  # explicit grouping of the angles, e.g. [[0,15],[90,105]]
    samples: int | None = None  # random subset of the training set (null = all)
    val_fraction: float = 0.3

    def check(self) -> None:
        if not self.angles:
            raise ValueError("angles must list at least one angle")
        if len({a % 360 for a in self.angles}) != len(self.angles):
            raise ValueError(f"angles must be distinct (mod 360), got {self.angles}")
        if self.samples is not None and self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        self.cluster_of_angle()  # validates groups

    def cluster_of_angle(self) -> np.ndarray:
        if self.groups is not None:
            return rotation_clusters(self.angles, self.groups)
        if self.group_by == "angle":
            return np.arange(len(self.angles), dtype=np.int64)
        return rotation_clusters(self.angles)


@SCENARIOS.register("rotation", "rotated images, one disjoint part per angle (angles=[0,15,90,105,...] CFL-GP paper, "
                    "[0,90,180,270] FedMD paper); nearby angles share a cluster", RotationParams)
def rotation(data: ArrayDataset | None, num_clients: int, params: RotationParams, rng: np.random.Generator
             ) -> Federation:
    data = check_data(data, "rotation")
    k = len(params.angles)
    if num_clients < k:
        raise ValueError(f"{k} angles need at least {k} clients, got {num_clients}")
    cluster = params.cluster_of_angle()
    keep = subsample(len(data.y_train), params.samples, rng)
    angle_of_client = balanced_assignment(num_clients, k, rng)
    parts = grouped_partition(data.y_train[keep], angle_of_client, k, params.split, params.alpha,
                              params.classes_per_client, rng)
    clients = [ClientPlan(keep[p], int(cluster[a]), None, rotator(params.angles[a]), int(a))
               for p, a in zip(parts, angle_of_client, strict=True)]
    tests = [full_test(data, int(cluster[a]), None, rotator(params.angles[a]), a) for a in range(k)]
    resize_plans(clients + tests, params.image_size)
    fed = assemble(data, clients, tests, params.val_fraction, rng, scenario_info("rotation", data, params),
                   [angle_name(a) for a in params.angles])
    fed.extras["angle"] = np.asarray(params.angles, dtype=np.float64)[angle_of_client]
    return fed
