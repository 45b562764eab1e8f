"""Where the clients work on one rank of a torchrun job: the :class:`Ranks` placement of the run loop.

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
from fedcluster.data.build import build_federation
from fedcluster.data.federation import Federation
from fedcluster.data.sharded import ShardedSplit
from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.distributed.follower import FollowerRunDir
from fedcluster.engine.distributed.group import rank, start, world_size
from fedcluster.engine.distributed.sharded import ShardedTrainer
from fedcluster.engine.distributed.shares import load_share, own_clients
from fedcluster.engine.distributed.state import check_same_state, share_state
from fedcluster.engine.placement import Placement
from fedcluster.engine.protocol import RoundResult, Trainer
from fedcluster.errors import ConfigError, UserError
from fedcluster.tracking.run_dir import RunDir, default_run_dir


class Ranks(Placement):
    """This rank of a torchrun job: its clients' inputs and work, rank 0's state after each round, rank 0 the only
    writer (module docstring). ``Run(cfg, typed, placement=Ranks())``."""

    where = "a run over ranks (torchrun), whose ranks each hold their clients' labels,"

    def __init__(self) -> None:
        self.rank, self.world = 0, 1
        self.device = torch.device("cpu")

    def prepare(self, cfg: RunConfig, run_dir: RunDir | None) -> RunDir | None:
        """Joins the process group; ranks > 0 write nothing (no progress, no tracking, a read-only run directory)."""
        start(cfg.device)
        self.rank, self.world = rank(), world_size()
        self.lead = self.rank == 0
        if self.rank != 0:
            cfg.progress = False
            cfg.tracking = []
            path = run_dir.path if run_dir is not None else Path(cfg.out or "runs/rank-follower")
            return FollowerRunDir(path)
        if run_dir is None and not cfg.out:  # the default folder is rank 0's to name
            return RunDir(default_run_dir(cfg.algorithm, cfg.scenario))
        return run_dir

    def load_federation(self, cfg: RunConfig, typed: dict[str, Any], device: torch.device) -> Federation:
        """Rank 0 builds the federation and the others read their clients' share of it (engine.distributed.shares)."""
        if self.world == 1:
            return build_federation(cfg, typed["scenario"])
        return load_share(cfg, typed["scenario"], self.rank, self.world, device)

    def hold(self, fed: Federation) -> Federation:
        """Only this rank's clients' inputs."""
        return own_clients(fed, self.rank, self.world)

    def trainer(self, module: torch.nn.Module, fed: Federation, cfg: RunConfig, path: str,
                device: torch.device) -> Trainer:
        if cfg.client_momentum == "keep":
            raise ConfigError("client_momentum=keep runs in one process: use ranks=1 (the ranks would each hold "
                              "only their own clients' buffers)")
        self.device = device
        tr = fed.train
        local = tr.local()
        trainer = ShardedTrainer(module, local.x, local.y, local.ptr, fed.task, seed=cfg.seed, path=path,
                                 workers=cfg.workers, channels_last=cfg.channels_last, precision=cfg.precision,
                                 chunk_mb=cfg.chunk_mb)
        trainer.split = tr if isinstance(tr, ShardedSplit) else None
        return trainer

    def check(self, alg: Algorithm, cfg: RunConfig) -> None:
        if self.world > 1 and (why := alg.reads_every_input()) is not None:
            raise UserError(f"{cfg.algorithm} with {why} needs every client's inputs in one process; run "
                            "it without ranks (ranks=1), or choose another setting")

    def play_round(self, alg: Algorithm, round_: int, clients: np.ndarray) -> RoundResult:
        """The round, then rank 0's state on every rank and a check that the ranks agree."""
        res = super().play_round(alg, round_, clients)
        share_state(alg, self.device)
        check_same_state(alg.state_dict(), round_ + 1, self.device if self.device.type == "cuda" else
                         torch.device("cpu"))
        return res
