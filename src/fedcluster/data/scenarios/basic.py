"""Basic scenarios: IID, label skew (three partition rules), and label skew with label-map concepts.

A scenario is ``fn(data, num_clients, params, rng) -> Federation``. Its parameters are a typed
dataclass (settable as ``scenario.<name>=value``) whose defaults are the papers' values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.common import (
    MapKind,
    check_ratios,
    full_test,
    label_maps,
    partition,
    resize_plans,
    scenario_info,
)
from fedcluster.data.scenarios.shared_params import LabelSplit, LocalData
from fedcluster.data.shifts.assignment import balanced_assignment, ratio_assignment
from fedcluster.data.shifts.concept import permutation_label_maps
from fedcluster.data.sources.base import ArrayDataset


@dataclass
class IIDParams(LocalData):
    """``image_size``: 14 for the FedMD paper's 14×14 MNIST."""


@SCENARIOS.register("iid", "uniform random split, one concept (sanity baseline)", IIDParams)
def iid(data: ArrayDataset, num_clients: int, params: IIDParams, rng: np.random.Generator) -> Federation:
    parts = partition(data.y_train, num_clients, "iid", 1.0, 1, rng)
    clients, tests = [ClientPlan(p) for p in parts], [full_test(data)]
    resize_plans(clients + tests, params.image_size)
    return assemble(data, clients, tests, params.val_fraction, rng, scenario_info("iid", data, params))


@dataclass
class LabelSkewParams(LocalData, LabelSplit):
    """Label shift only. ``split``: dirichlet (per-class Dir(α), HCFL paper/CFL-GP paper/FedRC paper),
    dirichlet-global (FedRC code,
    Dir(α·p_global) per client, equal sizes), classes (``classes_per_client`` classes each, HCFL paper Tables 11–13)
    or iid."""

    alpha: float = 0.5


@SCENARIOS.register("label-skew", "label shift only: Dirichlet(α) (split=dirichlet|dirichlet-global) or C classes per"
                    " client (split=classes)", LabelSkewParams)
def label_skew(data: ArrayDataset, num_clients: int, params: LabelSkewParams, rng: np.random.Generator
               ) -> Federation:
    parts = partition(data.y_train, num_clients, params.split, params.alpha, params.classes_per_client, rng)
    clients, tests = [ClientPlan(p) for p in parts], [full_test(data)]
    resize_plans(clients + tests, params.image_size)
    return assemble(data, clients, tests, params.val_fraction, rng, scenario_info("label-skew", data, params))


@dataclass
class ConceptSwapParams(LocalData, LabelSplit):
    """Label skew + concept shift by label maps (FedRC paper §5.1 / App. H.8, HCFL paper §5.1, CFL-GP paper App. F.7).

    ``maps``: fedrc (y, C−1−y, (y+1) mod C, …), hcfl-beta (the HCFL paper's β rule),
    shift (concept c: y → (y + c·shift) mod C; CFL-GP paper uses 2 concepts, shift 5), permutation (``perms``,
    one permutation per concept; ``concepts`` is then set to ``len(perms)``). ``ratios``: clients per
    concept in this ratio (FedRC paper Fig. 6b / Table 12: [8,1,1]); default equal groups.
    """

    concepts: int = 3  # number of concepts (label maps)
    maps: MapKind = "fedrc"  # label maps: fedrc, hcfl-beta, shift or permutation
    beta: float = 0.2  # β of maps=hcfl-beta
    shift: int = 5  # y → (y + c·shift) mod C with maps=shift
    perms: list[list[int]] | None = None  # one permutation of 0..C-1 per concept (maps=permutation)
    ratios: list[float] | None = None  # clients per concept in this ratio, e.g. [8,1,1] (null = equal)

    def check(self) -> None:
        if self.perms is not None:
            if self.maps != "permutation":
                raise ValueError("perms is only used with maps=permutation")
            self.concepts = len(permutation_label_maps(self.perms))
        elif self.maps == "permutation":
            raise ValueError("maps=permutation needs perms=[[...],[...]] (one permutation of 0..C-1 per concept)")
        if self.concepts < 1:
            raise ValueError(f"concepts must be >= 1, got {self.concepts}")
        if not 0 <= self.beta <= 1:
            raise ValueError(f"beta must be in [0, 1], got {self.beta}")
        check_ratios(self.ratios, self.concepts)


@SCENARIOS.register("concept-swap", "label skew + label-map concepts (maps=fedrc|hcfl-beta|shift|permutation, "
                    "ratios=[8,1,1]); one test client per concept", ConceptSwapParams)
def concept_swap(data: ArrayDataset, num_clients: int, params: ConceptSwapParams, rng: np.random.Generator
                 ) -> Federation:
    if params.concepts > num_clients:
        raise ValueError(f"{params.concepts} concepts need at least as many clients, got {num_clients}")
    maps = label_maps(params.maps, data.num_classes, params.concepts, params.beta, params.shift, params.perms)
    parts = partition(data.y_train, num_clients, params.split, params.alpha, params.classes_per_client, rng)
    if params.ratios is None:
        concept = balanced_assignment(num_clients, params.concepts, rng)
    else:
        concept = ratio_assignment(num_clients, params.ratios, rng)
    clients = [ClientPlan(p, int(c), maps[c]) for p, c in zip(parts, concept, strict=True)]
    tests = [full_test(data, c, maps[c]) for c in range(params.concepts)]
    resize_plans(clients + tests, params.image_size)
    fed = assemble(data, clients, tests, params.val_fraction, rng, scenario_info("concept-swap", data, params))
    fed.extras["label_maps"] = maps
    return fed
