"""The default placement of a run: every client's work in this process, by the in-process trainer."""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.engine.placement import Placement
from fedcluster.engine.protocol import Trainer
from fedcluster.engine.trainers.local import LocalTrainer


class InProcess(Placement):
    """Every client in this process: one :class:`~fedcluster.engine.trainers.local.LocalTrainer` for the cohort."""

    follows_drift = True

    def data_changed(self, trainer: Trainer, clients: np.ndarray) -> None:
        """The trainer reads the labels in place; its pool workers (engine=pool) hold a copy and are restarted."""
        if isinstance(trainer, LocalTrainer):
            trainer.refresh()

    def trainer(self, module: torch.nn.Module, fed: Federation, cfg: RunConfig, path: str,
                device: torch.device) -> Trainer:
        return LocalTrainer(module, fed.train.x, fed.train.y, fed.train.ptr, fed.task, seed=cfg.seed, path=path,
                       workers=cfg.workers, channels_last=cfg.channels_last, precision=cfg.precision,
                       chunk_mb=cfg.chunk_mb, client_momentum=cfg.client_momentum)
