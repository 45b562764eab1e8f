"""Where a run's clients work: the part the run loop is given (``Run(cfg, typed, placement=...)``) instead of being
subclassed.

The loop (:class:`~fedcluster.engine.runner.Run`) builds the federation, the model and the method itself and asks
its placement, at fixed points, for what depends on where the clients run: the run directory this process writes
(:meth:`Placement.prepare`), the part of the federation it holds, the trainer that does the clients' work, a check
of the method, how a round is played and whether this process writes the results. Three exist:

* :class:`~fedcluster.engine.in_process.InProcess` – every client in this process (the default);
* :class:`~fedcluster.engine.distributed.ranks.Ranks` – each rank of a torchrun job its own clients;
* ``fedcluster.flower``'s nodes – each client's work sent to its Flower node.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import torch

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.protocol import RoundResult, Trainer
from fedcluster.errors import UserError
from fedcluster.tracking.run_dir import RunDir


class Placement(ABC):
    """Where the clients' work of a run runs (module docstring); each hook but :meth:`trainer` keeps the
    in-process behaviour unless a placement overrides it."""

    lead = True  # this process writes the run directory's results (rounds, checkpoints, summary, tracking)

    def prepare(self, cfg: RunConfig, run_dir: RunDir | None) -> RunDir | None:
        """Called first, before anything is built: the run directory to use (None: the run's default)."""
        return run_dir

    def load_federation(self, cfg: RunConfig, typed: dict[str, Any], device: torch.device) -> Federation | None:
        """The federation when this placement reads it otherwise than the run builds it; None: the run builds it."""
        return None

    def hold(self, fed: Federation) -> Federation:
        """The part of the federation this process keeps (before it goes to the device): all of it."""
        return fed

    @abstractmethod
    def trainer(self, module: torch.nn.Module, fed: Federation, cfg: RunConfig, path: str,
                device: torch.device) -> Trainer:
        """The trainer that does the clients' work (local training, E-step losses, per-client computations) with
        ``module`` on the engine path ``path``."""

    def check(self, alg: Algorithm, cfg: RunConfig) -> None:  # noqa: B027  (a hook: nothing to refuse here)
        """Refuse, with a :class:`~fedcluster.errors.UserError`, a method setting this placement cannot run."""

    where = "this placement"  # how a refusal names the placement
    follows_drift = False  # whether it relabels its clients' data when a drifting federation changes concepts

    def check_drift(self, cfg: RunConfig) -> None:
        """Refuse a drifting federation (data.drift) unless the placement follows it (:meth:`data_changed`)."""
        if not self.follows_drift:
            raise UserError(f"scenario={cfg.scenario} changes the clients' concepts during the run, which "
                            f"{self.where} cannot follow; run it in one process (without ranks or Flower)")

    def data_changed(self, trainer: Trainer, clients: np.ndarray) -> None:  # noqa: B027  (a hook)
        """The labels of ``clients`` changed in place (a drifting federation's new round): refresh what the
        trainer keeps of them."""

    def play_round(self, alg: Algorithm, round_: int, clients: np.ndarray) -> RoundResult:
        """One round of ``alg`` with its sampled ``clients``."""
        return alg.run_round(round_, clients)
