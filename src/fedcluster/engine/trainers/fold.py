"""Local training folded into the aggregation: each vectorised call's trained models are added to the K weighted
sums as the call finishes, then freed (methods whose aggregation weights are known before local training: FedAvg,
IFCA, FedEM, FedRC, ...), so a round holds the K sums and one call's units, never every client's trained models.

:func:`train_into` is what the methods call: the in-process trainer trains and folds call by call
(:meth:`~fedcluster.engine.trainers.local.LocalTrainer.train_folded`); any other backend (a sharded or remote one, which
gathers the cohort's results anyway) trains the cohort in one call whose results are then added in one piece.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from fedcluster.engine.params import Params
from fedcluster.engine.protocol import Trainer
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer


class Sums(Protocol):
    """Weighted sums that trained units ``lo:hi`` are added to (tiers.aggregation.ModelSums / ClusterSums)."""

    group: int  # consecutive units that belong together (a call holds whole groups)

    def add(self, lo: int, hi: int, trained: Params) -> None:
        """Add units ``lo:hi``; ``trained`` must not be kept (the trainer may reuse its memory for the next call)."""


def train_into(backend: Trainer, sums: Sums, init: Params, clients: np.ndarray, solver: Solver, round_: int,
               weights: list[np.ndarray] | None = None, stream: int = 0, init_index: np.ndarray | None = None) -> None:
    """Train unit u from ``init[init_index[u]]`` (or ``init[u]``) on client ``clients[u]`` (as ``Trainer.train``)
    and add every unit to ``sums``, call by call where the backend trains in this process."""
    if isinstance(backend, LocalTrainer) and type(backend).train is LocalTrainer.train:
        backend.train_folded(sums, init, clients, solver, round_, weights, stream, init_index)
        return
    sums.add(0, len(clients), backend.train(init, clients, solver, round_, weights=weights, stream=stream,
                                            init_index=init_index))
