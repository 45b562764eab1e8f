"""Concept drift over rounds (FedDrift paper, Jothimurugesan et al., AISTATS 2023, §3 "distributed concept drift":
drifts that happen at different times at different clients, and concepts that come back).

Every drift scenario starts as ``concept-swap``: label skew, ``concepts`` label-map concepts (``maps``) over the
clients. A share ``ratio`` of the clients (drawn at random) then moves to a new concept (label map number
``concepts``), and the three scenarios differ in when:

* ``drift-sudden`` – every drifting client switches in round ``at`` (FedDrift paper Fig. 1's simultaneous drift);
* ``drift-gradual`` – the drifting clients switch staggered over ``window`` rounds from round ``at``, as evenly as
  their number allows (FedDrift paper §3: "drifts staggered in time", Table 1's staggered patterns);
* ``drift-recurring`` – every drifting client switches in round ``at`` and returns to its first concept in round
  ``back`` (A → B → A; FedDrift paper §3 and App. B: recurring concepts).

Rounds are counted as in rounds.csv (the first round is 1): a client that switches in round ``at`` trains and is
scored on the new concept from round ``at`` on. The test clients drift too: one test client (the whole test set)
for every schedule the participating clients follow (for each first concept: the clients that stay, and the
drifting clients of each switch round), with that schedule. The schedule is kept in ``Federation.extras``
(:mod:`fedcluster.data.drift`) and the run relabels the clients that change before each round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.scenarios.common import full_test, label_maps, partition, resize_plans, scenario_info
from fedcluster.data.scenarios.shared_params import LabelSplit, LocalData
from fedcluster.data.shifts.assignment import balanced_assignment
from fedcluster.data.sources.base import ArrayDataset

PAPER = ("Ellango Jothimurugesan, Kevin Hsieh, Jianyu Wang, Gauri Joshi, Phillip B. Gibbons. Federated Learning "
         "under Distributed Concept Drift. International Conference on Artificial Intelligence and Statistics "
         "(AISTATS), 2023.")


@dataclass
class DriftParams(LocalData, LabelSplit):
    """Label skew + label-map concepts whose clients drift to a new concept (FedDrift paper §3).

    ``concepts``: concepts before the drift (the FedDrift paper starts every client on one); ``maps``: fedrc (y,
    C−1−y, (y+1) mod C, …), hcfl-beta or shift, as in concept-swap; the drifting clients take map number
    ``concepts``. ``ratio``: share of the clients that drift; ``at``: the round of the (first) switch.
    """

    concepts: int = 1  # concepts before the drift (the new concept is one more)
    maps: Literal["fedrc", "hcfl-beta", "shift"] = "fedrc"  # label maps: fedrc, hcfl-beta or shift
    beta: float = 0.2  # β of maps=hcfl-beta
    shift: int = 5  # y → (y + c·shift) mod C with maps=shift
    ratio: float = 0.5  # share of the clients that drift to the new concept
    at: int = 10  # the round (counted from 1) in which the drifting clients switch

    def check(self) -> None:
        if self.concepts < 1:
            raise ValueError(f"concepts must be >= 1, got {self.concepts}")
        if not 0 <= self.beta <= 1:
            raise ValueError(f"beta must be in [0, 1], got {self.beta}")
        if not 0 < self.ratio <= 1:
            raise ValueError(f"ratio must be in (0, 1] (the share of clients that drift), got {self.ratio}")
        if self.at < 2:
            raise ValueError(f"at must be >= 2 (the first round with the new concept; round 1 is the start), "
                             f"got {self.at}")


@dataclass
class GradualDriftParams(DriftParams):
    """The drifting clients switch one group per round over ``window`` rounds from round ``at`` (staggered)."""

    window: int = 5  # rounds over which the drifting clients switch (staggered, from round at)

    def check(self) -> None:
        if self.window < 1:
            raise ValueError(f"window must be >= 1 (rounds over which clients switch), got {self.window}")


@dataclass
class RecurringDriftParams(DriftParams):
    """The drifting clients switch in round ``at`` and return to their first concept in round ``back``."""

    back: int = 20  # the round in which the drifting clients return to their first concept (> at)

    def check(self) -> None:
        if self.back <= self.at:
            raise ValueError(f"back must be > at (the concept returns after it left), got at={self.at}, "
                             f"back={self.back}")


def drifting_clients(num_clients: int, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """The ``round(ratio · M)`` clients (at least one) that drift, at random, sorted."""
    count = min(max(int(round(ratio * num_clients)), 1), num_clients)
    return np.sort(rng.choice(num_clients, size=count, replace=False))


def sudden_schedule(first: np.ndarray, drifting: np.ndarray, new: int, at: int) -> np.ndarray:
    """[at, M]: every client on ``first`` in rounds 1..at−1, the ``drifting`` ones on ``new`` in round ``at``."""
    sched = np.tile(first, (at, 1))
    sched[at - 1, drifting] = new
    return sched


def gradual_schedule(first: np.ndarray, drifting: np.ndarray, new: int, at: int, window: int,
                     rng: np.random.Generator) -> np.ndarray:
    """[at + window − 1, M]: the drifting clients in random order, cut into ``window`` groups as equal as can be;
    group g switches in round at + g (FedDrift paper's staggered drift)."""
    sched = np.tile(first, (at + window - 1, 1))
    order = rng.permutation(drifting)
    for g, part in enumerate(np.array_split(order, window)):
        sched[at - 1 + g:, part] = new
    return sched


def recurring_schedule(first: np.ndarray, drifting: np.ndarray, new: int, at: int, back: int) -> np.ndarray:
    """[back, M]: the drifting clients on ``new`` in rounds at..back−1, back on their first concept from ``back``."""
    sched = np.tile(first, (back, 1))
    sched[at - 1:back - 1, drifting] = new
    return sched


def test_schedules(train: np.ndarray) -> np.ndarray:
    """[H, T]: one test client per distinct schedule (column) of ``train``, ordered by first concept, then by the
    round the schedule first changes (never first)."""
    tracks = np.unique(train.T, axis=0)
    moved = tracks != tracks[:, :1]
    first_change = np.where(moved.any(1), moved.argmax(1), -1)
    order = np.lexsort((first_change, tracks[:, 0]))
    return tracks[order].T.copy()


def drift_federation(name: str, data: ArrayDataset, num_clients: int, params: DriftParams,
                     rng: np.random.Generator, schedule: np.ndarray, maps: np.ndarray) -> Federation:
    """The federation of round 1 with ``schedule`` [H, M] (and the test clients' schedules) in its extras."""
    parts = partition(data.y_train, num_clients, params.split, params.alpha, params.classes_per_client, rng)
    first = schedule[0]
    tests = test_schedules(schedule)
    clients = [ClientPlan(p, int(c), maps[c]) for p, c in zip(parts, first, strict=True)]
    test_plans = [full_test(data, int(c), maps[c]) for c in tests[0]]
    resize_plans(clients + test_plans, params.image_size)
    fed = assemble(data, clients, test_plans, params.val_fraction, rng, scenario_info(name, data, params))
    fed.extras.update(label_maps=maps, drift_train=schedule.astype(np.int64), drift_test=tests.astype(np.int64))
    return fed


def setup(data: ArrayDataset, num_clients: int, params: DriftParams, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The label maps (``concepts`` + 1), each client's first concept and the drifting clients."""
    if params.concepts > num_clients:
        raise ValueError(f"{params.concepts} concepts need at least as many clients, got {num_clients}")
    maps = label_maps(params.maps, data.num_classes, params.concepts + 1, params.beta, params.shift)
    if len({tuple(m) for m in maps}) < len(maps):
        raise ValueError(f"maps={params.maps} gives fewer than {len(maps)} distinct label maps here; choose "
                         "maps=fedrc or fewer concepts")
    first = balanced_assignment(num_clients, params.concepts, rng)
    return maps, first, drifting_clients(num_clients, params.ratio, rng)


@SCENARIOS.register("drift-sudden", "concept drift: a share (ratio) of the clients switches to a new label-map "
                    "concept in round at; per-round ground truth, test clients drift too", DriftParams, paper=PAPER)
def drift_sudden(data: ArrayDataset, num_clients: int, params: DriftParams, rng: np.random.Generator
                 ) -> Federation:
    maps, first, drifting = setup(data, num_clients, params, rng)
    return drift_federation("drift-sudden", data, num_clients, params, rng,
                            sudden_schedule(first, drifting, params.concepts, params.at), maps)


@SCENARIOS.register("drift-gradual", "concept drift: the drifting clients (ratio) switch to a new concept "
                    "staggered over window rounds from round at", GradualDriftParams, paper=PAPER)
def drift_gradual(data: ArrayDataset, num_clients: int, params: GradualDriftParams, rng: np.random.Generator
                  ) -> Federation:
    maps, first, drifting = setup(data, num_clients, params, rng)
    sched = gradual_schedule(first, drifting, params.concepts, params.at, params.window, rng)
    return drift_federation("drift-gradual", data, num_clients, params, rng, sched, maps)


@SCENARIOS.register("drift-recurring", "concept drift that recurs: the drifting clients (ratio) switch to a new "
                    "concept in round at and back in round back (A → B → A)", RecurringDriftParams, paper=PAPER)
def drift_recurring(data: ArrayDataset, num_clients: int, params: RecurringDriftParams, rng: np.random.Generator
                    ) -> Federation:
    maps, first, drifting = setup(data, num_clients, params, rng)
    sched = recurring_schedule(first, drifting, params.concepts, params.at, params.back)
    return drift_federation("drift-recurring", data, num_clients, params, rng, sched, maps)
