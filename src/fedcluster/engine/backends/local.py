"""The in-process backend: one :class:`Trainer` call trains a whole cohort's units in this process.

It serves the clients' work an algorithm asks for (:class:`~fedcluster.engine.protocol.Backend`:
local training, the E-step's per-sample losses, per-client computations) with one of the training kernels
(:mod:`fedcluster.engine.training.kernels`: ``sequential``, ``vectorized``, ``dense``, ``unit-loop``) or with
the ``pool`` path, the sequential kernel split over worker processes with one thread each (the fast path for CNNs on
the CPU, which are compute bound and scale better over processes than over intra-op threads).

The trainer works on the device of the federation's tensors it is given (the run moves them once). On a GPU the
vectorised path is the fast path; its units are trained in chunks sized by the memory plan of
:mod:`fedcluster.engine.memory` (the state held for the call first, the chunk from what is left). For methods whose
aggregation weights are known before training, :meth:`Trainer.train_folded` adds each chunk's trained models to the
K weighted sums as the chunk finishes (engine.backends.fold).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

import numpy as np
import torch
from torch import nn

from fedcluster.data.federation import Split
from fedcluster.engine import memory
from fedcluster.engine.evaluation.inference import StackForward
from fedcluster.engine.evaluation.scores import per_sample_losses
from fedcluster.engine.memory import (
    HELD_COPIES,
    MAX_UNITS,
    MemoryPlan,
    UnitFootprint,
    balanced_chunk,
    budget_bytes,
    chunk_units,
    footprint,
    unit_bytes,
)
from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.batches import make_schedule
from fedcluster.engine.training.dense import dense_layers, train_dense
from fedcluster.engine.training.kernels import (
    Batch,
    LossFn,
    build_batch,
    per_sample_loss,
    slice_batch,
    train_sequential,
    train_vectorized,
)
from fedcluster.engine.training.momentum import ClientMomentum, unit_keys
from fedcluster.engine.training.multihead import MultiHeadLoss
from fedcluster.engine.training.pool import start_pool, stop_pool
from fedcluster.engine.training.precision import autocast
from fedcluster.engine.transfer import to_device

LOSS_CHUNK = 4096  # training rows per forward pass of the E-step losses
SCRATCH_BYTES = 2 << 30  # the largest result stack the sequential path keeps for reuse between calls


class Trainer:
    """Trains stacks of units on a federation's training data with one of the three paths."""

    def __init__(self, module: nn.Module, x: torch.Tensor, y: torch.Tensor, ptr: np.ndarray, task: str,
                 seed: int, path: str = "vectorized", workers: int = 2,
                 channels_last: bool = False, max_units: int = MAX_UNITS, precision: str = "fp32",
                 chunk_mb: float | None = None, client_momentum: str = "reset") -> None:
        if x.device != y.device:
            raise ValueError(f"inputs on {x.device} but targets on {y.device}: move the federation once, whole")
        self.device = x.device
        if path in ("pool", "pool-vectorized", "dense") and self.device.type != "cpu":
            raise ValueError(f"engine={path} runs on the CPU only; on {self.device} use engine=vectorized "
                             "(or engine=auto)")
        if path == "dense" and precision != "fp32":
            raise ValueError("engine=dense computes in fp32; use engine=vectorized with precision=bf16")
        if client_momentum == "keep" and path in ("pool", "pool-vectorized"):
            raise ValueError(f"client_momentum=keep is not offered by engine={path}; use engine=dense, vectorized "
                             "or sequential")
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
        self._chunk: dict[tuple[int, int | None, bool], int] = {}  # units per call, by (batch, units, streamed)
        self._footprint: UnitFootprint | None = None  # the module's per-unit bytes (engine.memory)
        self._pool: mp.pool.Pool | None = None
        self._siblings: list[Trainer] = []
        # per-unit largest absolute entry of each training call, read by engine.divergence once per round
        self.pending: list[tuple[np.ndarray, torch.Tensor]] = []
        # the hand-written dense path (Flatten/Linear/ReLU models only; others fall back to vectorized)
        self.dense = dense_layers(module) if path == "dense" else None
        self._forward: StackForward | None = None  # inference forward of the E-step losses
        self._scratch: Params | None = None  # the sequential path's result stack, reused call after call

    def sibling(self, module: nn.Module, loss: LossFn) -> Trainer:
        """A trainer on the same data and path with another module and per-sample loss (closed with
        this one); e.g. a shared body with K heads whose loss returns [batch, K]."""
        t = type(self)(module, self.x, self.y, self.ptr, self.task, self.seed, self.path, self.workers,
                       self.channels_last, self.max_units, self.precision, self.chunk_mb, self.client_momentum)
        t.loss = loss
        if t.momentum is not None and (saved := self._loaded_momentum.pop(str(len(self._siblings) + 1), None)):
            t.momentum.load_state_dict(saved)
        t.pending = self.pending
        # the dense path knows the standard losses and engine.training.multihead's per-head loss
        t.dense = dense_layers(module) if self.path == "dense" and isinstance(loss, MultiHeadLoss) else None
        self._siblings.append(t)
        return t

    def chunk_size(self, batch_size: int, units: int | None = None, streamed: bool = False) -> int:
        """Units per vectorised call: ``max_units`` on the CPU unless ``chunk_mb`` is set; with ``chunk_mb``, what fits
        it; on an accelerator the memory plan (engine.memory.MemoryPlan): the results and starts a call of ``units``
        units holds (none apart from the call's own when ``streamed``: folded into the aggregation call by call)
        first, the chunk from the rest of the available memory. Balanced over the calls a round takes; measured
        once per (batch size, units, streamed)."""
        key = (batch_size, units, streamed)
        if key not in self._chunk:
            mem = memory.device_memory(self.device) if self.chunk_mb is None else None
            if mem is None and self.chunk_mb is None:
                return self.max_units
            if self._footprint is None:
                self._footprint = footprint(self.module, tuple(self.x.shape[1:]), self.x[:1])
            fp = self._footprint
            assert fp is not None  # never None with a real sample to fall back on
            if mem is None:  # chunk_mb: the MiB one call may use
                fit = chunk_units(budget_bytes(self.device, self.chunk_mb) or 1, fp.step_bytes(batch_size))
                self._chunk[key] = fit if units is None else balanced_chunk(units, fit)
            else:
                count = max(units or 1, 1)
                held = 0 if streamed or units is None else count * HELD_COPIES * fp.params
                sample = self.x[:1].numel() * self.x.element_size()
                plan = MemoryPlan(mem.available, held, unit_bytes(fp, batch_size, sample, streamed),
                                  count if units is not None else MAX_UNITS)
                self._chunk[key] = plan.chunk if units is not None else plan.fit
        return self._chunk[key]

    def fold_size(self, batch_size: int, units: int, group: int) -> int:
        """Units per call of :meth:`train_folded`, a multiple of ``group``: the vectorised paths' chunk (streamed);
        the other paths (pool, dense, sequential: their own concurrency) take the whole cohort in one call."""
        if self.path in ("pool", "pool-vectorized", "dense", "sequential") or units <= group:
            return max(units, 1)
        groups = units // group
        fit = max(1, self.chunk_size(batch_size, units, streamed=True) // group)
        return (fit if self.device.type == "cpu" and self.chunk_mb is None else balanced_chunk(groups, fit)) * group

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
        if self.path == "sequential" or (record is not None and self.path == "pool"):
            out = train_sequential(self.module, self.x, self.y, batch, solver, self.loss, self.channels_last,
                                   self.precision, self._reused_out(batch) if reuse else None)
        elif self.path in ("pool", "pool-vectorized") and record is None:
            out = self._train_pool(batch, solver)
        elif self.dense is not None:
            out = train_dense(self.dense, self.x, self.y, batch, solver, self.task)
        elif self.path == "unit-loop" and batch.weight.dim() == 3 and record is None:  # per-head: vectorised below
            from fedcluster.engine.training.looped import train_looped  # imports this module

            out = train_looped(self.module, self.x, self.y, batch, solver, self.loss, self.precision)
        else:
            out = train_vectorized(self.module, self.x, self.y, batch, solver, self.loss,
                                   chunk or self.chunk_size(solver.batch_size, len(clients)), self.precision)
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
        """Remember which units came back non-finite (the runner stops the run; methods never see this).

        Nothing is read back here: each unit's largest absolute entry (NaN or inf exactly when one of its entries
        is; min/max reductions allocate no stack-sized temporary and cannot overflow) is kept on the device
        until :meth:`take_watch`, so training adds no host sync to a round."""
        if len(clients) == 0 or next(iter(out.values())).device.type == "meta":  # meta: shapes only, no values
            return
        peaks = []
        for v in out.values():
            if not v[0].numel():
                continue
            if v.device.type == "cpu":  # whole-tensor reductions unit by unit: ~10x the CPU's per-row kernel
                low, high = (torch.stack(t) for t in zip(*(torch.aminmax(unit) for unit in v), strict=True))
            else:
                low, high = torch.aminmax(v.reshape(len(clients), -1), dim=1)
            peaks.append(torch.maximum(high, -low))
        if peaks:
            self.pending.append((np.asarray(clients), torch.stack(peaks).amax(0)))

    def take_watch(self) -> list[tuple[np.ndarray, torch.Tensor]]:
        """The (clients, per-unit largest absolute entry) pairs recorded by :meth:`_watch` since the last call."""
        out = list(self.pending)
        self.pending.clear()
        return out

    def take_nonfinite(self) -> list[int]:
        """The clients whose units came back non-finite since the last call, sorted (one host read)."""
        watched = self.take_watch()
        if not watched:
            return []
        finite = torch.isfinite(torch.cat([s for _, s in watched])).cpu().numpy()
        clients = np.concatenate([c for c, _ in watched])
        return sorted({int(c) for c in clients[~finite]})

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
    def _train_pool(self, batch: Batch, solver: Solver) -> Params:
        if self._pool is None:  # started once, reused by every round until close()
            _install_quiet_hook()  # before the workers start: forked workers inherit it too
            self._pool = start_pool(self.workers, _init_worker, (
                dict(module=self.module, x=self.x, y=self.y, loss=self.loss, cl=self.channels_last,
                     vectorized=self.path == "pool-vectorized", max_units=self.max_units,
                     precision=self.precision),))
        U = len(batch.steps)
        # Hand units out longest first, round-robin, so both workers get similar work.
        order = np.argsort(-batch.steps, kind="stable")
        parts = [order[i:: self.workers] for i in range(self.workers)]
        parts = [p for p in parts if len(p)]
        jobs = [self._pool.apply_async(_pool_job, (slice_batch(batch, p), solver)) for p in parts]
        out = batch.empty_out()
        for p, job in zip(parts, jobs, strict=True):
            res = job.get()
            idx = torch.as_tensor(p)
            for k in out:
                out[k][idx] = res[k]
        assert sum(len(p) for p in parts) == U
        return out

    def refresh(self) -> None:
        """The training labels changed in place (a drifting federation): the pool workers, which hold a copy of
        them, are stopped and start again, on the new labels, at the next call that needs them."""
        self.close()

    def close(self) -> None:
        for t in self._siblings:
            t.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            stop_pool(pool)


_WORKER: dict = {}


def _init_worker(state: dict) -> None:
    """Runs once in each pool worker: one intra-op thread, the training data kept for every job; Ctrl-C is
    the parent's to handle (workers would print a traceback each)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    _WORKER.update(state)


_HOOK: list = []  # the excepthook that _quiet_lost_transfers replaced


def _quiet_lost_transfers(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """multiprocessing's tensor-sharing thread (resource_sharer) reports a peer that went away mid-transfer
    (Ctrl-C, pool.terminate) through sys.excepthook; that is not an error worth a traceback."""
    if issubclass(kind, ConnectionError | EOFError) and tb is not None \
            and tb.tb_frame.f_code.co_filename.endswith("resource_sharer.py"):
        return
    (_HOOK[0] if _HOOK else sys.__excepthook__)(kind, value, tb)


def _install_quiet_hook() -> None:
    if sys.excepthook is not _quiet_lost_transfers:
        _HOOK[:] = [sys.excepthook]
        sys.excepthook = _quiet_lost_transfers


def _pool_job(batch: Batch, solver: Solver) -> Params:
    w = _WORKER
    if w["vectorized"]:
        return train_vectorized(w["module"], w["x"], w["y"], batch, solver, w["loss"], w["max_units"],
                                w["precision"])
    return train_sequential(w["module"], w["x"], w["y"], batch, solver, w["loss"], w["cl"], w["precision"])
