"""Checkpoints of a run: written by a callback of the round loop, read back when a run resumes.

A checkpoint (every ``checkpoint_every`` rounds and after the last) holds the round, the seconds so far, the
config, the method's state (CPU tensors: portable), every row at full precision and, with
``client_momentum=keep``, the clients' kept SGD buffers. It is written with the round's row, Ctrl-C held, so the
files never tell of a round the checkpoint does not hold.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from fedcluster.config.run_config import RunConfig, dump_config
from fedcluster.data.federation import Federation
from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.callbacks import RoundCallback, RoundEnd, Row
from fedcluster.engine.protocol import Trainer
from fedcluster.engine.transfer import state_to_device
from fedcluster.tracking.checkpoint_schema import CheckpointSchemaError, check_algorithm_state
from fedcluster.tracking.run_dir import RunDir


class Checkpointing(RoundCallback):
    """Writes the checkpoint every ``checkpoint_every`` rounds and after the last; ``last`` is the round of the
    newest one (the round a resumed run started from, before any)."""

    def __init__(self, run_dir: RunDir, cfg: RunConfig, alg: Algorithm, trainer: Trainer, first: int) -> None:
        self.dir, self.cfg, self.alg, self.trainer = run_dir, cfg, alg, trainer
        self.last = first

    def on_round(self, end: RoundEnd) -> None:
        if end.round % self.cfg.checkpoint_every and not end.last:
            return
        state = state_to_device(self.alg.state_dict(), torch.device("cpu"))  # portable: CPU tensors
        saved = {"round": end.round, "elapsed": end.elapsed, "config": self.cfg.to_dict(), "algorithm": state,
                 "rows": end.rows}
        if self.cfg.client_momentum == "keep":  # the clients' kept SGD buffers (engine.training.momentum)
            saved["client_momentum"] = state_to_device(self.trainer.momentum_state(), torch.device("cpu"))
        self.dir.save_checkpoint(saved)
        self.last = end.round


def restore(run_dir: RunDir, cfg: RunConfig, alg: Algorithm, module: torch.nn.Module, fed: Federation,
            trainer: Trainer, device: torch.device) -> tuple[int, float, list[Row]]:
    """A resumed run's round to continue from, seconds so far and rows kept: the method's state (and the clients'
    momentum buffers) loaded from the checkpoint, checked against this run first; round 0 (with a note) when the
    run stopped before its first checkpoint. The run directory then holds the rows up to that round only and the
    config this session runs with (e.g. more rounds)."""
    first, elapsed, saved_rows = 0, 0.0, None
    if run_dir.checkpoint.exists() or run_dir.checkpoint.is_symlink():  # a broken link is refused, not absent
        state = run_dir.load_checkpoint()
        check_state(alg, state["algorithm"], state["round"], module, fed, str(run_dir.checkpoint))
        alg.load_state_dict(state_to_device(state["algorithm"], device))
        if cfg.client_momentum == "keep":
            load_momentum(state, run_dir, trainer, device)
        first, elapsed = state["round"], state["elapsed"]
        saved_rows = state.get("rows")
    else:
        print(f"fedcluster: note: {run_dir.path} has no checkpoint yet; starting it again from round 0",
              file=sys.stderr)
    rows = run_dir.restart_at(first)
    if saved_rows is not None:  # the checkpoint's rows keep full precision (rounds.csv has 6 digits)
        rows = [dict(r) for r in saved_rows]
    run_dir.write_config(dump_config(cfg))  # what this run really uses (e.g. the new rounds)
    return first, elapsed, rows


def check_state(alg: Algorithm, state: dict[str, Any], rounds: int, module: torch.nn.Module, fed: Federation,
                where: str) -> None:
    """Raise :class:`CheckpointSchemaError` (one line) unless the algorithm ``state`` of a checkpoint of ``rounds``
    rounds fits ``alg``: its structure (the schema), then every saved field's values (its kind, and what the method
    relates across fields)."""
    shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    check_algorithm_state(state, state_to_device(alg.state_dict(), torch.device("cpu")), shapes, where,
                          (fed.num_clients, fed.train.num_samples, fed.num_classes), alg.fixed_clusters)
    if (problem := alg.state_problem(state, rounds)) is not None:
        raise CheckpointSchemaError(f"checkpoint {where} does not fit this run: {problem}; it was not loaded (it "
                                    "was modified): start the run again with another out=")


def load_momentum(state: dict[str, Any], run_dir: RunDir, trainer: Trainer, device: torch.device) -> None:
    """The clients' kept momentum buffers of a checkpoint (client_momentum=keep), refused in one line when
    absent or malformed: a resume without them would not continue the run it says it continues."""
    saved = state.get("client_momentum")
    where = str(run_dir.checkpoint)
    if not isinstance(saved, dict) or not all(isinstance(v, dict) and isinstance(v.get("buffers"), dict)
                                              and "keys" in v for v in saved.values()):
        raise CheckpointSchemaError(f"checkpoint {where} holds no client momentum buffers but this run keeps "
                                    "them (client_momentum=keep); start the run again with another out=")
    try:
        trainer.load_momentum_state(state_to_device(saved, device))
    except (ValueError, TypeError, AttributeError) as e:
        raise CheckpointSchemaError(f"checkpoint {where} has client momentum buffers that do not fit ({e}); "
                                    "start the run again with another out=") from None
