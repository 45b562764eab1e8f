"""The engine's contract: what a backend does for the algorithms and the round loop (the clients' side of a round,
:class:`Trainer`) and what a round returns (:class:`RoundResult`). Every room of the engine may import it.

An algorithm asks its backend (``ctx.trainer``) for the clients' work and never learns where that work runs:

* :class:`~fedcluster.engine.trainers.local.LocalTrainer` – in this process, one call for a whole cohort;
* :class:`~fedcluster.engine.distributed.sharded.ShardedTrainer` – each rank of a torchrun job trains its own
  clients and one ``all_reduce`` gives every rank the cohort's results;
* :class:`~fedcluster.engine.trainers.remote.RemoteTrainer` – one request per client, carried to the client's
  node by a transport (``fedcluster.flower`` supplies one).

Everything else (aggregation, Ω and γ, clustering, splits and merges) is the server's and runs on the results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from fedcluster.data.federation import Split
from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.kernels import LossFn


@dataclass
class RoundResult:
    """Communication of one round (bytes actually exchanged) and algorithm-specific metrics."""

    bytes_up: int
    bytes_down: int
    extra: dict[str, float] = field(default_factory=dict)
    clusters: dict[str, Any] | None = None  # per-cluster data makeup (tracking.clusters), → clusters.jsonl


@runtime_checkable
class Trainer(Protocol):
    """The clients' work of a round, as the algorithms (train, losses, per_client, sibling) and the round loop
    (momentum state, divergence peaks, close) ask for it."""

    def train(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
              weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
              init_index: np.ndarray | None = None) -> Params:
        """Unit u trained from ``init[u]`` (or ``init[init_index[u]]``) on client ``clients[u]``'s data with
        per-sample ``weights[u]``, a proximal ``anchor`` and ``solver``; batches seeded by (seed, round, client,
        stream). The stack [U, ...] in unit order."""
        ...

    def train_steps(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
                    weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
                    init_index: np.ndarray | None = None) -> tuple[Params, np.ndarray]:
        """:meth:`train` and each unit's mini-batch loss at each of its local steps [U, S] (before the step's
        update; NaN past a unit's last step), for a method that reads loss trajectories."""
        ...

    def losses(self, models: Params, rows: np.ndarray, shared_body: bool = False) -> np.ndarray:
        """[N, K] per-sample losses of the K stacked ``models`` on the training ``rows`` (an E-step)."""
        ...

    def per_client(self, split: Split, compute: Callable[[Split], np.ndarray | torch.Tensor],
                   clients: np.ndarray | None = None) -> np.ndarray | torch.Tensor:
        """``compute``'s values for the ``clients`` of ``split``, each client's from its own rows, computed where
        the clients' data are."""
        ...

    def sibling(self, module: nn.Module, loss: LossFn) -> Trainer:
        """A backend on the same clients with another module and per-sample loss (closed with this one)."""
        ...

    def momentum_state(self) -> dict[str, Any]:
        """The clients' kept SGD buffers (client_momentum=keep) for a checkpoint; {} when none are kept."""
        ...

    def load_momentum_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`momentum_state`."""
        ...

    def take_watch(self) -> list[tuple[np.ndarray, torch.Tensor]]:
        """(clients, per-unit largest absolute entry) of the units trained since the last call, still on the
        device (the divergence watch reads them)."""
        ...

    def close(self) -> None:
        """Release worker processes or connections."""
        ...
