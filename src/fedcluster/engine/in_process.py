"""The default placement of a run: every client's work in this process, by the in-process backend."""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.engine.backends.local import Trainer
from fedcluster.engine.placement import Placement
from fedcluster.engine.protocol import Backend


class InProcess(Placement):
    """Every client in this process: one :class:`~fedcluster.engine.backends.local.Trainer` for the cohort."""

    follows_drift = True

    def data_changed(self, trainer: Backend, clients: np.ndarray) -> None:
        """The trainer reads the labels in place; its pool workers (engine=pool) hold a copy and are restarted."""
        if isinstance(trainer, Trainer):
            trainer.refresh()

    def backend(self, module: torch.nn.Module, fed: Federation, cfg: RunConfig, path: str,
                device: torch.device) -> Backend:
        return Trainer(module, fed.train.x, fed.train.y, fed.train.ptr, fed.task, seed=cfg.seed, path=path,
                       workers=cfg.workers, channels_last=cfg.channels_last, precision=cfg.precision,
                       chunk_mb=cfg.chunk_mb, client_momentum=cfg.client_momentum)
