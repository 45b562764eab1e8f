"""The messages between :class:`~fedcluster.flower.strategy.ClusteredStrategy` and
:class:`~fedcluster.flower.client.ClusteredClient` inside a user's own Flower app.

Their message types carry fedcluster's own action names, so a user's ClientApp keeps its plain ``train`` and
``evaluate`` functions beside them: ``query.fedcluster_hello`` (a node reports its data), ``train.fedcluster``
(local training of units) and ``query.fedcluster_losses`` (an E-step's per-sample losses). Requests are
:mod:`fedcluster.flower.records` contents (engine.trainers.remote requests); the run's settings travel beside
each request as JSON in the ``run`` record.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

HELLO_TYPE = "query.fedcluster_hello"
TRAIN_TYPE = "train.fedcluster"
LOSSES_TYPE = "query.fedcluster_losses"
NODE = "fedcluster"  # a hello reply's ConfigRecord: partition-id (-1: none), samples, input-shape
LABELS = "labels"  # a hello reply's ArrayRecord: the node's training targets ("y")
CLUSTER_KEY = "cluster"  # the evaluate config key naming the model a node receives


@dataclass(frozen=True)
class RunSettings:
    """What a node needs besides a request to answer it as the in-process engine would: the run's seed (batch
    schedules), the number of clients (the layout of client ids) and the task (the per-sample loss)."""

    seed: int
    num_clients: int
    task: str

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def of(text: str) -> RunSettings:
        raw = json.loads(text)
        return RunSettings(int(raw["seed"]), int(raw["num_clients"]), str(raw["task"]))
