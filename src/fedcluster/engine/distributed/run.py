"""The run loop on one rank of a torchrun job: :class:`DistributedRun`.

Every rank runs the same program (``torchrun --nproc-per-node N -m fedcluster run ...``, or ``fedcluster run
... ranks=N``, which starts torchrun's elastic agent itself: :mod:`fedcluster.app.launch`). Each rank trains its
own clients (the sharded backend, :mod:`fedcluster.engine.distributed.sharded`) and holds only their inputs
(:mod:`fedcluster.engine.distributed.shares`). A method setting whose server reads every input
(:meth:`Algorithm.reads_every_input`) is refused with more than one rank.

The server's steps (aggregation, E-step statistics, clustering, splits, merges) then run on every rank on
bitwise identical inputs, and after each round every rank takes rank 0's state
(:mod:`fedcluster.engine.distributed.state`). Only rank 0 writes the run directory (rounds, checkpoints,
summary, tracking: :mod:`fedcluster.engine.distributed.follower`); a resumed run reads the checkpoint on every
rank (for several machines the run directory must be on a shared file system).

A rank that dies ends the run: torchrun's agent stops the others, and ``fedcluster run ... ranks=N`` prints one
line naming the rank.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.data.sharded import ShardedSplit
from fedcluster.engine.algorithm import RoundResult
from fedcluster.engine.distributed.follower import FollowerRunDir
from fedcluster.engine.distributed.group import rank, start, world_size
from fedcluster.engine.distributed.sharded import ShardedTrainer
from fedcluster.engine.distributed.shares import load_share, own_clients
from fedcluster.engine.distributed.state import check_same_state, share_state
from fedcluster.engine.protocol import Backend
from fedcluster.engine.runner import Run, summarize
from fedcluster.errors import ConfigError, UserError
from fedcluster.tracking.run_dir import RunDir, default_run_dir


class DistributedRun(Run):
    """The in-process run loop on one rank of a torchrun job (module docstring)."""

    def __init__(self, cfg: RunConfig, typed: dict[str, Any], resume: bool = False,
                 fed: Federation | None = None, run_dir: RunDir | None = None) -> None:
        start(cfg.device)
        self.rank, self.world = rank(), world_size()
        if self.rank != 0:
            cfg.progress = False
            cfg.tracking = []
            path = run_dir.path if run_dir is not None else Path(cfg.out or "runs/rank-follower")
            run_dir = FollowerRunDir(path)
        elif run_dir is None and not cfg.out:  # the default folder is rank 0's to name
            run_dir = RunDir(default_run_dir(cfg.algorithm, cfg.scenario))
        super().__init__(cfg, typed, resume, fed, run_dir)

    def load_federation(self) -> Federation:
        """Rank 0 builds the federation and the others read their clients' share of it (engine.distributed.shares)."""
        if self.world == 1:
            return super().load_federation()
        return load_share(self.cfg, self.typed["scenario"], self.rank, self.world, self.device)

    def hold(self, fed: Federation) -> Federation:
        """Only this rank's clients' inputs."""
        return own_clients(fed, self.rank, self.world)

    def _build(self, fed: Federation | None) -> None:
        super()._build(fed)
        if self.world > 1 and (why := self.alg.reads_every_input()) is not None:
            raise UserError(f"{self.cfg.algorithm} with {why} needs every client's inputs in one process; run "
                            "it without ranks (ranks=1), or choose another setting")

    def make_trainer(self, module: torch.nn.Module) -> Backend:
        cfg, tr = self.cfg, self.fed.train
        if cfg.client_momentum == "keep":
            raise ConfigError("client_momentum=keep runs in one process: use ranks=1 (the ranks would each hold "
                              "only their own clients' buffers)")
        local = tr.local()
        trainer = ShardedTrainer(module, local.x, local.y, local.ptr, self.fed.task, seed=cfg.seed,
                                 path=self.engine_path, workers=cfg.workers, precision=cfg.precision,
                                 chunk_mb=cfg.chunk_mb)
        trainer.split = tr if isinstance(tr, ShardedSplit) else None
        return trainer

    def play_round(self, t: int) -> RoundResult:
        res = super().play_round(t)
        share_state(self.alg, self.device)
        check_same_state(self.alg.state_dict(), t + 1, self.device if self.device.type == "cuda" else
                         torch.device("cpu"))
        return res

    def finish(self, rows: list[dict[str, Any]], val_acc: np.ndarray, elapsed: float) -> dict[str, Any]:
        self.alg.assignment()  # may gather from every rank (a client never trained): all of them take part
        if self.rank == 0:
            return super().finish(rows, val_acc, elapsed)
        return summarize(rows) | {"wall_seconds": elapsed, "run_dir": str(self.dir.path)}
