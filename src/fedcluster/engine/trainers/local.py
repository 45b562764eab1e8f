"""The in-process backend: one :class:`LocalTrainer` call trains a whole cohort's units in this process.

It serves the clients' work an algorithm asks for (:class:`~fedcluster.engine.protocol.Trainer`:
local training, the E-step's per-sample losses, per-client computations) with the engine path named by
``engine=`` (:data:`PATHS`, one row each: what it runs and where it may run) — the training kernels of
:mod:`fedcluster.engine.training.kernels` (``sequential``, ``vectorized``, ``dense``, ``unit-loop``) or the ``pool``
paths, the sequential (or vectorised) kernel split over worker processes with one thread each
(:class:`~fedcluster.engine.training.pool.TrainingPool`: the fast path for CNNs on the CPU, which are compute bound
and scale better over processes than over intra-op threads).

The trainer works on the device of the federation's tensors it is given (the run moves them once). On a GPU the
vectorised path is the fast path; its units are trained in chunks sized by the memory plan
(:class:`~fedcluster.engine.trainers.chunks.ChunkPlanner`). For methods whose aggregation weights are known before
training, :meth:`LocalTrainer.train_folded` adds each chunk's trained models to the K weighted sums as the chunk
finishes (engine.trainers.fold). Which units came back non-finite is kept by a
:class:`~fedcluster.engine.trainers.watch.NonFiniteWatch` for the runner's divergence check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from fedcluster.data.federation import Split
from fedcluster.engine.evaluation.inference import StackForward
from fedcluster.engine.evaluation.scores import per_sample_losses
from fedcluster.engine.memory import MAX_UNITS
from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.chunks import ChunkPlanner
from fedcluster.engine.trainers.watch import NonFiniteWatch
from fedcluster.engine.training.batches import make_schedule
from fedcluster.engine.training.dense import dense_layers, train_dense
from fedcluster.engine.training.kernels import (
    Batch,
    LossFn,
    build_batch,
    per_sample_loss,
    train_sequential,
    train_vectorized,
)
from fedcluster.engine.training.momentum import ClientMomentum, unit_keys
from fedcluster.engine.training.multihead import MultiHeadLoss
from fedcluster.engine.training.pool import TrainingPool
from fedcluster.engine.training.precision import autocast
from fedcluster.engine.transfer import to_device

LOSS_CHUNK = 4096  # training rows per forward pass of the E-step losses
SCRATCH_BYTES = 2 << 30  # the largest result stack the sequential path keeps for reuse between calls


@dataclass(frozen=True)
class Call:
    """One training call as a path sees it: its units, the units per vectorised call (None: the planner's), whether
    per-step losses are recorded and whether the caller frees the result before the next call."""

    units: int
    chunk: int | None
    recording: bool
    reuse: bool


def _sequential(t: LocalTrainer, batch: Batch, solver: Solver, call: Call) -> Params:
    return train_sequential(t.module, t.x, t.y, batch, solver, t.loss, t.channels_last, t.precision,
                            t._reused_out(batch) if call.reuse else None)


def _vectorized(t: LocalTrainer, batch: Batch, solver: Solver, call: Call) -> Params:
    return train_vectorized(t.module, t.x, t.y, batch, solver, t.loss,
                            call.chunk or t.chunk_size(solver.batch_size, call.units), t.precision)


def _pool(t: LocalTrainer, batch: Batch, solver: Solver, call: Call) -> Params:
    if call.recording:  # per-step losses: the sequential kernel in this process
        return _sequential(t, batch, solver, call) if t.path == "pool" else _vectorized(t, batch, solver, call)
    return t.pool().train(batch, solver)


def _dense(t: LocalTrainer, batch: Batch, solver: Solver, call: Call) -> Params:
    if t.dense is None:  # a model or loss the hand-written path does not know: vectorised
        return _vectorized(t, batch, solver, call)
    return train_dense(t.dense, t.x, t.y, batch, solver, t.task)


def _unit_loop(t: LocalTrainer, batch: Batch, solver: Solver, call: Call) -> Params:
    if batch.weight.dim() != 3 or call.recording:  # one weight per sample only (per-head weights: vectorised)
        return _vectorized(t, batch, solver, call)
    from fedcluster.engine.training.looped import train_looped  # imports this module

    return train_looped(t.module, t.x, t.y, batch, solver, t.loss, t.precision)


@dataclass(frozen=True)
class Path:
    """One engine path: the function that trains a call's units, and where it may run."""

    train: Callable[[LocalTrainer, Batch, Solver, Call], Params]
    cpu_only: bool = False
    fp32_only: bool = False
    keeps_momentum: bool = True  # client_momentum=keep offered


PATHS: dict[str, Path] = {  # ``engine=``'s paths (``auto`` is resolved before a trainer is made)
    "vectorized": Path(_vectorized),
    "sequential": Path(_sequential),
    "dense": Path(_dense, cpu_only=True, fp32_only=True),
    "unit-loop": Path(_unit_loop),
    "pool": Path(_pool, cpu_only=True, keeps_momentum=False),
    "pool-vectorized": Path(_pool, cpu_only=True, keeps_momentum=False),
}


class LocalTrainer:
    """Trains stacks of units on a federation's training data with one of the three paths."""

    def __init__(self, module: nn.Module, x: torch.Tensor, y: torch.Tensor, ptr: np.ndarray, task: str,
                 seed: int, path: str = "vectorized", workers: int = 2,
                 channels_last: bool = False, max_units: int = MAX_UNITS, precision: str = "fp32",
                 chunk_mb: float | None = None, client_momentum: str = "reset") -> None:
        if x.device != y.device:
            raise ValueError(f"inputs on {x.device} but targets on {y.device}: move the federation once, whole")
        self.device = x.device
        if path not in PATHS:
            raise ValueError(f"engine={path} is not an engine path; use one of {', '.join(PATHS)}")
        kind = PATHS[path]
        if kind.cpu_only and self.device.type != "cpu":
            raise ValueError(f"engine={path} runs on the CPU only; on {self.device} use engine=vectorized "
                             "(or engine=auto)")
        if kind.fp32_only and precision != "fp32":
            raise ValueError(f"engine={path} computes in fp32; use engine=vectorized with precision=bf16")
        if client_momentum == "keep" and not kind.keeps_momentum:
            raise ValueError(f"client_momentum=keep is not offered by engine={path}; use engine=dense, vectorized "
                             "or sequential")
        self.kind = kind
        autocast(self.device, precision)  # validates ``precision``
        self.client_momentum = client_momentum
        # client_momentum=keep: each (client, cluster model)'s SGD buffer across rounds (engine.training.momentum)
        self.momentum = ClientMomentum(self.device) if client_momentum == "keep" else None
        self._loaded_momentum: dict[str, Any] = {}  # checkpointed buffers of siblings not made yet
        self.module, self.x, self.y, self.ptr = module.to(self.device), x, y, ptr
        self.sizes = np.diff(ptr)
        self.task, self.seed, self.path, self.workers = task, seed, path, workers
        self.precision, self.chunk_mb = precision, chunk_mb
        self.loss = per_sample_loss(task)
        self.channels_last = channels_last
        self.max_units = max_units
        self.planner = ChunkPlanner(self.module, x, max_units, chunk_mb)
        self._pool: TrainingPool | None = None
        self._siblings: list[LocalTrainer] = []
        self.watch = NonFiniteWatch()  # read by engine.divergence once per round
        # the hand-written dense path (Flatten/Linear/ReLU models only; others fall back to vectorized)
        self.dense = dense_layers(module) if path == "dense" else None
        self._forward: StackForward | None = None  # inference forward of the E-step losses
        self._scratch: Params | None = None  # the sequential path's result stack, reused call after call

    def sibling(self, module: nn.Module, loss: LossFn) -> LocalTrainer:
        """A trainer on the same data and path with another module and per-sample loss (closed with
        this one); e.g. a shared body with K heads whose loss returns [batch, K]."""
        t = type(self)(module, self.x, self.y, self.ptr, self.task, self.seed, self.path, self.workers,
                       self.channels_last, self.max_units, self.precision, self.chunk_mb, self.client_momentum)
        t.loss = loss
        if t.momentum is not None and (saved := self._loaded_momentum.pop(str(len(self._siblings) + 1), None)):
            t.momentum.load_state_dict(saved)
        t.watch = self.watch
        # the dense path knows the standard losses and engine.training.multihead's per-head loss
        t.dense = dense_layers(module) if self.path == "dense" and isinstance(loss, MultiHeadLoss) else None
        self._siblings.append(t)
        return t

    def chunk_size(self, batch_size: int, units: int | None = None, streamed: bool = False) -> int:
        """Units per vectorised call (:meth:`ChunkPlanner.chunk_size`)."""
        return self.planner.chunk_size(batch_size, units, streamed)

    def fold_size(self, batch_size: int, units: int, group: int) -> int:
        """Units per call of :meth:`train_folded`, a multiple of ``group`` (:meth:`ChunkPlanner.fold_size`)."""
        return self.planner.fold_size(self.path, batch_size, units, group)

    def train_folded(self, sums: Any, init: Params, clients: np.ndarray, solver: Solver, round_: int,
                     weights: list[np.ndarray] | None = None, stream: int = 0,
                     init_index: np.ndarray | None = None) -> None:
        """:meth:`train` call by call, each call's trained units ``lo:hi`` added to ``sums`` (backends.fold.Sums) as
        the call finishes and then freed: the round holds the sums and one call's units."""
        clients = np.asarray(clients, dtype=np.int64)
        size = self.fold_size(solver.batch_size, len(clients), sums.group)
        for lo in range(0, len(clients), size):
            hi = min(lo + size, len(clients))
            part = ({k: v[lo:hi] for k, v in init.items()}, None) if init_index is None else (init, init_index[lo:hi])
            out = self._train(part[0], clients[lo:hi], solver, round_, None if weights is None else weights[lo:hi],
                              None, stream, part[1], chunk=hi - lo, reuse=True)
            sums.add(lo, hi, out)
            del out

    def train(
        self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
        weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
        init_index: np.ndarray | None = None,
    ) -> Params:
        """Train unit u (initial parameters ``init[u]``, or ``init[init_index[u]]``: K models shared by many
        units need not be copied once per unit) on client ``clients[u]``; return the stack [U, ...]."""
        return self._train(init, clients, solver, round_, weights, anchor, stream, init_index)

    def train_steps(
        self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
        weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
        init_index: np.ndarray | None = None,
    ) -> tuple[Params, np.ndarray]:
        """:meth:`train`, and each unit's mini-batch loss at each of its local steps [U, S] (before the step's
        update, without the proximal term; NaN past a unit's last step). The same training as :meth:`train`."""
        losses: list[torch.Tensor] = []
        out = self._train(init, clients, solver, round_, weights, anchor, stream, init_index, record=losses)
        return out, losses[0].double().cpu().numpy()

    def _train(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
               weights: list[np.ndarray] | None, anchor: Params | None, stream: int,
               init_index: np.ndarray | None, chunk: int | None = None,
               record: list[torch.Tensor] | None = None, reuse: bool = False) -> Params:
        """:meth:`train`; ``chunk``: units per vectorised call (default: :meth:`chunk_size`'s); ``record``: a list
        that receives the units' per-step losses [U, S] (see :meth:`train_steps`); ``reuse``: the caller is done
        with the result before the next call (:meth:`train_folded`), so the sequential path may fill the same
        memory again."""
        clients = np.asarray(clients, dtype=np.int64)
        sched = make_schedule(self.sizes, clients, self.seed, round_, solver.epochs, solver.batch_size,
                              stream, solver.max_steps, solver.drop_last)
        batch = build_batch(init, clients, self.ptr, sched, weights, anchor, self.device, init_index)
        if record is not None:
            batch.step_losses = torch.full(tuple(batch.count.shape), float("nan"), device=batch.count.device)
            record.append(batch.step_losses)
        keys = None
        if self.momentum is not None and solver.momentum > 0 and stream == 0:  # the rounds' training only
            keys = unit_keys(clients, stream, init_index)
            batch.momentum = self.momentum.gather(keys, batch.init)
        call = Call(len(clients), chunk, record is not None, reuse)
        out = self.kind.train(self, batch, solver, call)
        if keys is not None and batch.momentum is not None:
            self.momentum.put(keys, batch.momentum)
        self._watch(out, clients)
        return out

    def _reused_out(self, batch: Batch) -> Params:
        """The result stack kept from the previous call when it has the batch's shape, else a new one kept for the
        next (up to ``SCRATCH_BYTES``): a fresh stack of many units costs the CPU more in page faults than
        their training writes in it."""
        shapes = {k: ((len(batch.steps), *v.shape[1:]), v.dtype, v.device) for k, v in batch.init.items()}
        kept = self._scratch
        if kept is not None and {k: (tuple(v.shape), v.dtype, v.device) for k, v in kept.items()} == shapes:
            return kept
        out = batch.empty_out()
        size = sum(v.numel() * v.element_size() for v in out.values())
        self._scratch = out if size <= SCRATCH_BYTES else None
        return out

    def momentum_state(self) -> dict[str, Any]:
        """The kept momentum buffers of this trainer ("0") and its siblings ("1", ...), for a checkpoint."""
        if self.momentum is None:
            return {}
        return {"0": self.momentum.state_dict(), **{str(i + 1): t.momentum.state_dict()
                                                    for i, t in enumerate(self._siblings) if t.momentum is not None}}

    def load_momentum_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`momentum_state` (siblings made later pick theirs up when they are made)."""
        if self.momentum is None:
            return
        if "0" in state:
            self.momentum.load_state_dict(state["0"])
        self._loaded_momentum = {k: v for k, v in state.items() if k != "0"}
        for i, t in enumerate(self._siblings):
            if t.momentum is not None and (saved := self._loaded_momentum.pop(str(i + 1), None)):
                t.momentum.load_state_dict(saved)

    def _watch(self, out: Params, clients: np.ndarray) -> None:
        """Remember which units came back non-finite (:meth:`NonFiniteWatch.record`; no host read)."""
        self.watch.record(out, clients)

    def take_watch(self) -> list[tuple[np.ndarray, torch.Tensor]]:
        """The (clients, per-unit largest absolute entry) pairs of the training calls since the last call."""
        return self.watch.take()

    def take_nonfinite(self) -> list[int]:
        """The clients whose units came back non-finite since the last call, sorted (one host read)."""
        return self.watch.take_nonfinite()

    def per_client(self, split: Split, compute: Callable[[Split], np.ndarray | torch.Tensor],
                   clients: np.ndarray | None = None) -> np.ndarray | torch.Tensor:
        """Values of the ``clients`` of ``split`` (default: all; [len(clients), ...]) that ``compute`` works out
        from the rows of the split it is given, each client's from its own rows only. Here ``compute(split)`` (a
        tensor stays where it is: the caller copies it to the host with its other results); a run spread over
        processes (engine.distributed.sharded) computes each client's values where its data are and gathers them."""
        out = compute(split)
        return out if isinstance(out, torch.Tensor) else np.asarray(out)

    @torch.no_grad()
    def losses(self, models: Params, rows: np.ndarray, shared_body: bool = False) -> np.ndarray:
        """[N, K] per-sample losses of the K stacked ``models`` on training ``rows`` (an E-step's client
        work): one batched pass over the whole cohort, gathered LOSS_CHUNK rows at a time on the CPU and as
        many as the free memory allows (one vectorised forward each) on an accelerator."""
        if self._forward is None:
            self._forward = StackForward(self.module)
        planned = self._forward.rows_per_pass(models, self.x)  # None on the CPU
        chunk = planned or LOSS_CHUNK
        out = []
        for i in range(0, len(rows), chunk):
            idx = to_device(rows[i:i + chunk], self.x.device)
            outputs = self._forward(models, self.x[idx], shared_body, chunk=planned)
            out.append(per_sample_losses(outputs, self.y[idx], self.task).T)
        return torch.cat(out).double().cpu().numpy() if out else np.zeros((0, len(next(iter(models.values())))))

    # -- process pool ------------------------------------------------------------------------
    def pool(self) -> TrainingPool:
        """The worker processes of the pool paths, made at the first call and kept until :meth:`close`."""
        if self._pool is None:
            self._pool = TrainingPool(self.workers, self.module, self.x, self.y, self.loss, self.channels_last,
                                      self.path == "pool-vectorized", self.max_units, self.precision)
        return self._pool

    def refresh(self) -> None:
        """The training labels changed in place (a drifting federation): the pool workers, which hold a copy of
        them, are stopped and start again, on the new labels, at the next call that needs them."""
        self.close()

    def close(self) -> None:
        for t in self._siblings:
            t.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()
