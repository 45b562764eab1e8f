"""``scenario=natural``: the data set's own clients (FEMNIST's writers) are the federation's clients.

``num_clients`` writers with at least ``min_samples`` training samples are drawn (seeded); each keeps all of
its training samples (``val_fraction`` of them held out for local validation). Their held-out test samples form
the test clients, one per concept. ``concepts`` > 1 adds concept shift on top of the natural one: the drawn
writers are split into equal groups, group c's labels mapped by label map c (``maps``, as in concept-swap), so
that clustered methods have clusters to find; ``concepts=1`` keeps every label as written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.common import (
    MapKind,
    label_maps,
    resize_plans,
    scenario_info,
)
from fedcluster.data.scenarios.shared_params import LocalData
from fedcluster.data.shifts.assignment import balanced_assignment
from fedcluster.data.sources.base import ArrayDataset
from fedcluster.data.sources.leaf import WriterDataset


@dataclass
class NaturalParams(LocalData):
    min_samples: int = 10  # draw only writers with at least this many training samples
    concepts: int = 1  # label-map concepts over the drawn writers (1 = labels as written)
    maps: MapKind = "fedrc"  # label maps with concepts > 1: fedrc, hcfl-beta or shift (permutation: concept-swap only)
    shift: int = 5  # y → (y + c·shift) mod C with maps=shift

    def check(self) -> None:
        if self.min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {self.min_samples}")
        if self.concepts < 1:
            raise ValueError(f"concepts must be >= 1, got {self.concepts}")
        if self.maps == "permutation":
            raise ValueError("maps=permutation is not offered here; use fedrc, hcfl-beta or shift")


@SCENARIOS.register("natural", "the data set's own clients (FEMNIST writers): num_clients writers drawn, concepts=C "
                    "adds label-map concepts", NaturalParams)
def natural(data: ArrayDataset | None, num_clients: int, params: NaturalParams, rng: np.random.Generator
            ) -> Federation:
    if not isinstance(data, WriterDataset):
        name = data.name if data is not None else "a synthetic data set"
        raise ValueError(f"{name} has no natural clients; use dataset=femnist (its writers are the clients) or "
                         "another scenario, e.g. label-skew")
    sizes = np.bincount(data.train_writer, minlength=len(data.writers))
    eligible = np.flatnonzero(sizes >= params.min_samples)
    if num_clients > len(eligible):
        raise ValueError(f"num_clients={num_clients} but only {len(eligible)} writers have >= {params.min_samples} "
                         "training samples; pass a smaller num_clients or scenario.min_samples")
    if params.concepts > num_clients:
        raise ValueError(f"{params.concepts} concepts need at least as many clients, got {num_clients}")
    drawn = np.sort(rng.choice(eligible, size=num_clients, replace=False))
    concept = balanced_assignment(num_clients, params.concepts, rng) if params.concepts > 1 else \
        np.zeros(num_clients, dtype=np.int64)
    maps = label_maps(params.maps, data.num_classes, params.concepts, shift=params.shift) \
        if params.concepts > 1 else None
    clients = [ClientPlan(np.flatnonzero(data.train_writer == w), int(c), None if maps is None else maps[c])
               for w, c in zip(drawn, concept, strict=True)]
    tests = []
    for c in range(params.concepts):
        rows = np.flatnonzero(np.isin(data.test_writer, drawn[concept == c]))
        tests.append(ClientPlan(rows, c, None if maps is None else maps[c]))
    resize_plans(clients + tests, params.image_size)
    info = {**scenario_info("natural", data, params), "writers": [data.writers[w] for w in drawn]}
    fed = assemble(data, clients, tests, params.val_fraction, rng, info)
    if maps is not None:
        fed.extras["label_maps"] = maps
    return fed
