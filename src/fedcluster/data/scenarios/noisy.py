"""Label noise on top of label skew (HCFL paper §5.1 / App. E.1 Table 4; FedRC paper App. H Table 13).

Every client's training labels get exactly round(χ·n_i) flips: ``symmetric`` to any other class
uniformly, ``pair`` y → (y+1) mod C (the HCFL paper's definitions; FedRC paper swaps the names). Local validation and
the test client stay clean. Ground truth: ``extras["flipped"]`` per training sample and
``extras["clean_label"]``. One concept (compose with concepts via ``hcfl-shift scenario.noise=...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.basic import LabelSkewParams
from fedcluster.data.scenarios.common import (
    add_label_noise,
    check_data,
    check_noise_rate,
    full_test,
    partition,
    resize_plans,
    scenario_info,
)
from fedcluster.data.sources.base import ArrayDataset


@dataclass
class LabelNoiseParams(LabelSkewParams):
    """``noise``: symmetric or pair flip; ``noise_rate``: χ (HCFL paper: pair 0.1/0.2, symmetric 0.2/0.4; FedRC
    paper: 0.2)."""

    noise: Literal["symmetric", "pair"] = "symmetric"  # symmetric or pair flips
    noise_rate: float = 0.2  # χ, the share of flipped training labels
    alpha: float = 1.0

    def check(self) -> None:
        check_noise_rate(self.noise_rate)


@SCENARIOS.register("label-noise", "label skew + symmetric/pair label flips at rate χ on training labels (HCFL paper "
                    "Table 4, FedRC paper Table 13)", LabelNoiseParams)
def label_noise(data: ArrayDataset | None, num_clients: int, params: LabelNoiseParams, rng: np.random.Generator
                ) -> Federation:
    data = check_data(data, "label-noise")
    parts = partition(data.y_train, num_clients, params.split, params.alpha, params.classes_per_client, rng)
    clients, tests = [ClientPlan(p) for p in parts], [full_test(data)]
    resize_plans(clients + tests, params.image_size)
    fed = assemble(data, clients, tests, params.val_fraction, rng, scenario_info("label-noise", data, params))
    add_label_noise(fed, params.noise, params.noise_rate, rng)
    return fed
