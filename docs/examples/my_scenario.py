"""A scenario of your own, in one file: ``inverted`` — label skew plus a feature-shift concept.

Half of the clients (concept 1) see colour-inverted images (x → 1 − x), the other half the originals
(concept 0); labels are split over clients by Dirichlet(α) as in ``label-skew``. One non-participating test
client per concept holds the whole test set in that concept's colours.

A scenario is ``fn(data, num_clients, params, rng) -> Federation``: plan which source rows every client holds
and which shift applies (:class:`ClientPlan`), then :func:`assemble` applies the plans, splits local
validation data off and packs the federation with its ground truth (``concept`` per client).
Importing this module registers it; then ``scenario="inverted"`` works in every config.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.common import check_data, check_split, full_test, partition, scenario_info
from fedcluster.data.sources.base import ArrayDataset


@dataclass
class InvertedParams:
    alpha: float = 1.0  # Dirichlet concentration α of the label split (smaller = more skew)
    inverted_share: float = 0.5  # share of clients that see inverted images (concept 1)
    val_fraction: float = 0.2  # share of each client's samples held out for local validation

    def __post_init__(self) -> None:  # a ValueError becomes one clear line naming scenario.<key>
        check_split(self.alpha, 1)
        if not 0 < self.inverted_share < 1:
            raise ValueError(f"inverted_share must be in (0, 1), got {self.inverted_share}")


def invert(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The feature shift of concept 1 (images are in [0, 1])."""
    return 1.0 - x


@SCENARIOS.register("inverted", "label skew + half the clients see colour-inverted images (docs/examples)",
                    InvertedParams)
def inverted(data: ArrayDataset | None, num_clients: int, params: InvertedParams, rng: np.random.Generator
             ) -> Federation:
    data = check_data(data, "inverted")
    parts = partition(data.y_train, num_clients, "dirichlet", params.alpha, 1, rng)
    concept = (rng.permutation(num_clients) < round(params.inverted_share * num_clients)).astype(int)
    clients = [ClientPlan(idx, concept=int(c), transform=invert if c else None)
               for idx, c in zip(parts, concept, strict=True)]
    tests = [full_test(data, concept=0), full_test(data, concept=1, transform=invert)]
    return assemble(data, clients, tests, params.val_fraction, rng, scenario_info("inverted", data, params))
