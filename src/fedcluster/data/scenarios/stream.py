"""The FedRC paper's real concept-drift federations (Table 3, App. I.1): Airline and Electricity records split over
the clients by label with LDA (Dir(α) per class, α = 0.1), scored on two test clients whose test sets have drifted
apart (the stream's start and its end, each label-balanced: fedcluster.data.sources.streams)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.common import check_split, check_val_fraction, partition, scenario_info
from fedcluster.data.sources.base import ArrayDataset
from fedcluster.errors import ConfigError

STREAMS = ("airline", "electricity")


@dataclass
class StreamDriftParams:
    alpha: float = 0.1  # Dirichlet concentration α of the LDA label split (the FedRC paper: 0.1)
    val_fraction: float = 0.2  # share of each client's samples held out for local validation

    def __post_init__(self) -> None:
        check_val_fraction(self.val_fraction)
        check_split(self.alpha, 1)


@SCENARIOS.register("stream-drift", "FedRC paper Table 3: Airline/Electricity records split by LDA (α = 0.1); two "
                    "test clients from the stream's start and end (dataset=airline|electricity)", StreamDriftParams)
def stream_drift(data: ArrayDataset, num_clients: int, params: StreamDriftParams, rng: np.random.Generator
                 ) -> Federation:
    if data.name not in STREAMS:
        raise ConfigError(f"scenario=stream-drift needs dataset=airline or dataset=electricity, got {data.name!r}")
    parts = partition(data.y_train, num_clients, "dirichlet", params.alpha, 1, rng)
    half = len(data.y_test) // 2  # the test split: the stream's start, then its end
    tests = [ClientPlan(np.arange(0, half), concept=0), ClientPlan(np.arange(half, len(data.y_test)), concept=1)]
    return assemble(data, [ClientPlan(p) for p in parts], tests, params.val_fraction, rng,
                    scenario_info("stream-drift", data, params))
