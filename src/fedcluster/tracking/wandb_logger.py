"""``tracking=wandb``: one Weights & Biases run per fedcluster run, through the same observer protocol.

The resolved config is the W&B run's config (flat ``algorithm.mu``-style keys, as MLflow's parameters), every
``rounds.csv`` column a metric logged at ``step = round`` (rounds without evaluation are skipped, not NaN), and
when the run finishes its result files are copied into the W&B run's files folder, which W&B uploads. The
project is ``tracking_experiment`` (default ``fedcluster``); W&B's own environment variables choose the rest:
``WANDB_MODE=offline`` keeps everything on disk (``wandb sync`` uploads it later), ``WANDB_ENTITY`` the team,
``WANDB_DIR`` the folder of W&B's files (default: RUN_DIR). A resumed run starts a new W&B run that holds
every round, as with MLflow. wandb is imported only when asked for (``pip install 'fedcluster[wandb]'``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fedcluster.config.run_config import RunConfig
from fedcluster.errors import UserError
from fedcluster.tracking.observer import flatten_config, require, result_files, round_metrics

INSTALL_HINT = "pip install 'fedcluster[wandb]'"
EXIT_CODES = {"FINISHED": 0, "KILLED": 130, "FAILED": 1}


class WandbLogger:
    """Config, per-round metrics and (when finished) the result files of one run, to W&B."""

    def __init__(self, cfg: RunConfig, run_dir: Path) -> None:
        require("wandb", hint=INSTALL_HINT)
        self.cfg, self.run_dir = cfg, run_dir
        self.run: Any = None

    def start(self, rows: Sequence[Mapping[str, float]]) -> None:
        import wandb

        where = None if os.environ.get("WANDB_DIR") else str(self.run_dir)
        settings = wandb.Settings(console="off", quiet=True, init_timeout=60)
        try:
            self.run = wandb.init(project=self.cfg.tracking_experiment, name=self.run_dir.name, dir=where,
                                  config=flatten_config(self.cfg), settings=settings, reinit="create_new",
                                  notes=f"fedcluster run directory {self.run_dir.resolve()}",
                                  tags=[f"resumed-after-{int(rows[-1]['round'])}"] if rows else None)
        except Exception as e:  # noqa: BLE001 - no login, no network, a bad setting: wandb's many errors
            text = " ".join(str(e).split())[:200] or type(e).__name__
            raise UserError(f"tracking=wandb: W&B could not start a run ({text}); run `wandb login`, or set "
                            "WANDB_MODE=offline to log on disk only, or run with tracking=none") from None
        for row in rows:
            self.log_round(row)

    def discard(self) -> None:
        """Undo :meth:`start` (another logger could not start): the W&B run ends as failed."""
        if self.run is not None:
            self.run.finish(exit_code=1)
            self.run = None

    def log_round(self, row: Mapping[str, Any]) -> None:
        metrics = round_metrics(row)
        if metrics:
            self.run.log(metrics, step=int(row["round"]))

    def end(self, status: str) -> None:
        if self.run is None:
            return
        if status == "FINISHED":  # W&B uploads what its run's files folder holds
            for path in result_files(self.run_dir):
                shutil.copy2(path, Path(self.run.dir) / path.name)
        self.run.finish(exit_code=EXIT_CODES.get(status, 1))
        self.run = None
