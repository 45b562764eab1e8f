"""Local training of many units (client × model pairs) at once.

A *unit* is one model trained on one client's data with per-sample weights (1 for FedAvg; the
E-step responsibilities γ_{i,j;k} for FedEM/FedRC). Three paths give the same models:

* ``sequential`` – the reference: one ``nn.Module`` and ``torch.optim.SGD`` per unit, one unit
  after the other (what FL frameworks do, minus their DataLoader/deep-copy overhead);
* ``vectorized`` – all units' parameters stacked, one ``torch.func.vmap(grad(...))`` call per
  step; the fast path for linear models and MLPs, whose per-client work is too small for a CPU;
* ``pool`` – the sequential path split over worker processes with one thread each; the fast path
  for CNNs on the CPU, which are compute bound and scale better over processes than over intra-op threads.

The trainer works on the device of the federation's tensors it is given (the run moves them once): batches,
parameters and updates stay there. ``precision="bf16"`` runs forward and backward under ``torch.autocast``
(bfloat16) with fp32 parameters, updates and results. On a GPU the vectorised path is the fast path; its units
are trained in chunks sized by a memory budget over the per-unit estimate of :mod:`fedcluster.engine.memory`.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from fedcluster.data.federation import Split
from fedcluster.engine.batches import Schedule, make_schedule
from fedcluster.engine.dense import dense_layers, train_dense
from fedcluster.engine.evaluation import per_sample_losses
from fedcluster.engine.inference import StackForward
from fedcluster.engine.memory import (
    MAX_UNITS,
    UnitFootprint,
    balanced_chunk,
    budget_bytes,
    chunk_units,
    footprint,
)
from fedcluster.engine.momentum import ClientMomentum, unit_keys
from fedcluster.engine.multihead import MultiHeadLoss
from fedcluster.engine.params import Params
from fedcluster.engine.pool import start_pool, stop_pool
from fedcluster.engine.precision import PRECISIONS, autocast  # noqa: F401  (PRECISIONS: re-exported)
from fedcluster.engine.solver import Solver
from fedcluster.engine.transfer import to_device

LOSS_CHUNK = 4096  # training rows per forward pass of the E-step losses
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (outputs, targets) -> per-sample loss


class PerSampleLoss:
    """Cross-entropy (classification) or squared error (regression) per sample; picklable for the pool."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.task == "classification":
            return F.cross_entropy(out.float(), y, reduction="none")
        return (out.float().squeeze(-1) - y) ** 2


def per_sample_loss(task: str) -> LossFn:
    return PerSampleLoss(task)



@dataclass
class Batch:
    """Unit-major tensors for one training call."""

    init: Params  # stacked [R, ...] starting points (R = U, or fewer shared through ``init_index``)
    init_index: torch.Tensor | None  # [U] row of ``init`` each unit starts from; None: row u
    anchor: Params | None  # stacked [U, ...] proximal centre; None: each unit's starting point
    global_index: torch.Tensor  # [U, S, B] rows of the federation's train tensors
    weight: torch.Tensor  # [U, S, B] (or [U, S, B, K]) per-sample weight × padding mask
    count: torch.Tensor  # [U, S] real samples per step (loss denominators)
    steps: np.ndarray  # [U]
    # [U, ...] each unit's SGD momentum buffer at the start (client_momentum=keep; None: zeros), updated in place
    momentum: Params | None = None
    real: np.ndarray | None = None  # [U, S] real samples per step on the host (trims the padding with no sync)
    init_rows: np.ndarray | None = None  # ``init_index`` on the host (a unit's start read with no sync)

    def real_counts(self) -> np.ndarray:
        """[U, S] real samples per step, on the host (read back once if the batch was built without them)."""
        if self.real is None:
            self.real = self.count.cpu().numpy().astype(np.int64)
        return self.real

    def start(self, units: torch.Tensor) -> Params:
        """The starting parameters of ``units`` [u] as a new stack [u, ...]."""
        rows = units if self.init_index is None else self.init_index[units]
        return {k: v.index_select(0, rows) for k, v in self.init.items()}

    def centre(self, units: torch.Tensor) -> Params:
        """The proximal centres of ``units`` [u] as a new stack [u, ...]."""
        if self.anchor is None:
            return self.start(units)
        return {k: v.index_select(0, units) for k, v in self.anchor.items()}

    def start_of(self, unit: int) -> int:
        """The row of ``init`` that unit ``unit`` starts from."""
        if self.init_index is None:
            return unit
        return int(self.init_rows[unit]) if self.init_rows is not None else int(self.init_index[unit])

    def empty_out(self) -> Params:
        """An uninitialised result stack [U, ...] shaped like the parameters."""
        return {k: v.new_empty((len(self.steps), *v.shape[1:])) for k, v in self.init.items()}


def build_batch(
    init: Params, clients: np.ndarray, ptr: np.ndarray, schedule: Schedule,
    weights: list[np.ndarray] | None, anchor: Params | None, device: torch.device | None = None,
    init_index: np.ndarray | None = None,
) -> Batch:
    """The batch on ``device`` (default: the CPU): schedules are built on the host and moved once."""
    device = torch.device("cpu") if device is None else device
    offsets = torch.from_numpy(ptr[clients].astype(np.int64)).view(-1, 1, 1)  # host, like the schedule
    # host-built round data go to the device without a host sync (engine.transfer)
    w = schedule.mask.clone()
    if weights is not None:
        # [n_i] arrays weight each sample; [n_i, K] arrays weight each (sample, output head) pair and
        # need a loss that returns [batch, K] (e.g. engine.multihead's shared body + K heads).
        gathered = torch.stack([torch.as_tensor(wu, dtype=torch.float32).cpu()[schedule.local[u]]
                                for u, wu in enumerate(weights)])
        w = gathered * (w if gathered.dim() == 3 else w.unsqueeze(-1))
    index = None if init_index is None else to_device(np.asarray(init_index, dtype=np.int64), device)
    return Batch(
        init={k: v.to(device) for k, v in init.items()}, init_index=index,
        anchor=None if anchor is None else {k: v.to(device) for k, v in anchor.items()},
        global_index=to_device(schedule.local + offsets, device), weight=to_device(w, device),
        count=to_device(schedule.mask.sum(-1).clamp(min=1.0), device), steps=schedule.steps,
        real=schedule.mask.sum(-1).numpy().astype(np.int64),
        init_rows=None if init_index is None else np.asarray(init_index, dtype=np.int64),
    )


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
        # client_momentum=keep: each (client, cluster model)'s SGD buffer across rounds (engine.momentum)
        self.momentum = ClientMomentum(self.device) if client_momentum == "keep" else None
        self._loaded_momentum: dict[str, Any] = {}  # checkpointed buffers of siblings not made yet
        self.module, self.x, self.y, self.ptr = module.to(self.device), x, y, ptr
        self.sizes = np.diff(ptr)
        self.task, self.seed, self.path, self.workers = task, seed, path, workers
        self.precision, self.chunk_mb = precision, chunk_mb
        self.loss = per_sample_loss(task)
        self.channels_last = channels_last
        self.max_units = max_units
        self._chunk: dict[int, int] = {}  # units per vectorised chunk, by batch size
        self._footprint: UnitFootprint | None = None  # the module's per-unit bytes (engine.memory)
        self._pool: mp.pool.Pool | None = None
        self._siblings: list[Trainer] = []
        # per-unit largest absolute entry of each training call, read by engine.divergence once per round
        self.pending: list[tuple[np.ndarray, torch.Tensor]] = []
        # the hand-written dense path (Flatten/Linear/ReLU models only; others fall back to vectorized)
        self.dense = dense_layers(module) if path == "dense" else None
        self._forward: StackForward | None = None  # inference forward of the E-step losses

    def sibling(self, module: nn.Module, loss: LossFn) -> Trainer:
        """A trainer on the same data and path with another module and per-sample loss (closed with
        this one); e.g. a shared body with K heads whose loss returns [batch, K]."""
        t = type(self)(module, self.x, self.y, self.ptr, self.task, self.seed, self.path, self.workers,
                       self.channels_last, self.max_units, self.precision, self.chunk_mb, self.client_momentum)
        t.loss = loss
        if t.momentum is not None and (saved := self._loaded_momentum.pop(str(len(self._siblings) + 1), None)):
            t.momentum.load_state_dict(saved)
        t.pending = self.pending
        # the dense path knows the standard losses and engine.multihead's per-head loss
        t.dense = dense_layers(module) if self.path == "dense" and isinstance(loss, MultiHeadLoss) else None
        self._siblings.append(t)
        return t

    def chunk_size(self, batch_size: int, units: int | None = None) -> int:
        """Units per vectorised call: ``max_units`` on the CPU unless ``chunk_mb`` is set; on an accelerator
        what fits the memory budget (``chunk_mb``, or a share of the free device memory), measured once per
        batch size; for a call of ``units`` units, balanced over the calls it takes (engine.memory)."""
        if batch_size not in self._chunk:
            budget = budget_bytes(self.device, self.chunk_mb)
            if budget is None:
                return self.max_units
            if self._footprint is None:
                self._footprint = footprint(self.module, tuple(self.x.shape[1:]), self.x[:1])
            assert self._footprint is not None  # never None with a real sample to fall back on
            self._chunk[batch_size] = chunk_units(budget, self._footprint.step_bytes(batch_size))
        fit = self._chunk[batch_size]
        return fit if units is None else balanced_chunk(units, fit)

    def train(
        self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
        weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
        init_index: np.ndarray | None = None,
    ) -> Params:
        """Train unit u (initial parameters ``init[u]``, or ``init[init_index[u]]``: K models shared by many
        units need not be copied once per unit) on client ``clients[u]``; return the stack [U, ...]."""
        clients = np.asarray(clients, dtype=np.int64)
        sched = make_schedule(self.sizes, clients, self.seed, round_, solver.epochs, solver.batch_size,
                              stream, solver.max_steps, solver.drop_last)
        batch = build_batch(init, clients, self.ptr, sched, weights, anchor, self.device, init_index)
        keys = None
        if self.momentum is not None and solver.momentum > 0 and stream == 0:  # the rounds' training only
            keys = unit_keys(clients, stream, init_index)
            batch.momentum = self.momentum.gather(keys, batch.init)
        if self.path == "sequential":
            out = train_sequential(self.module, self.x, self.y, batch, solver, self.loss, self.channels_last,
                                   self.precision)
        elif self.path in ("pool", "pool-vectorized"):
            out = self._train_pool(batch, solver)
        elif self.dense is not None:
            out = train_dense(self.dense, self.x, self.y, batch, solver, self.task)
        elif self.path == "unit-loop" and batch.weight.dim() == 3:  # per-head weights: vectorised below
            from fedcluster.engine.looped import train_looped  # imports this module

            out = train_looped(self.module, self.x, self.y, batch, solver, self.loss, self.precision)
        else:
            out = train_vectorized(self.module, self.x, self.y, batch, solver, self.loss,
                                   self.chunk_size(solver.batch_size, len(clients)), self.precision)
        if keys is not None and batch.momentum is not None:
            self.momentum.put(keys, batch.momentum)
        self._watch(out, clients)
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
            if v[0].numel():
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
        processes (engine.distributed) computes each client's values where its data are and gathers them."""
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
        jobs = [self._pool.apply_async(_pool_job, (_slice_batch(batch, p), solver)) for p in parts]
        out = batch.empty_out()
        for p, job in zip(parts, jobs, strict=True):
            res = job.get()
            idx = torch.as_tensor(p)
            for k in out:
                out[k][idx] = res[k]
        assert sum(len(p) for p in parts) == U
        return out

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


def _slice_batch(b: Batch, idx: np.ndarray) -> Batch:
    """Units ``idx`` of ``b``; shared starting points stay shared (only their index is sliced)."""
    t = torch.as_tensor(idx, device=b.global_index.device)
    steps = b.steps[idx]
    S = int(steps.max(initial=1))
    if b.init_index is not None:
        init, init_index = b.init, b.init_index[t]
        init_rows = None if b.init_rows is None else b.init_rows[idx]
    else:
        init, init_index, init_rows = {k: v[t] for k, v in b.init.items()}, None, None
    return Batch(
        init=init, init_index=init_index, anchor=None if b.anchor is None else {k: v[t] for k, v in b.anchor.items()},
        global_index=b.global_index[t, :S], weight=b.weight[t, :S], count=b.count[t, :S], steps=steps,
        momentum=None if b.momentum is None else {k: v[t] for k, v in b.momentum.items()},
        real=None if b.real is None else b.real[idx, :S], init_rows=init_rows,
    )


# -- the reference path -------------------------------------------------------------------------
def train_sequential(module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: Batch, solver: Solver,
                     loss_fn: LossFn, channels_last: bool = False, precision: str = "fp32") -> Params:
    """One unit at a time with ``torch.optim.SGD``: the plain reference implementation."""
    out = batch.empty_out()
    model = copy.deepcopy(module)
    names = [n for n, _ in model.named_parameters()]
    for u in range(len(batch.steps)):
        row = batch.start_of(u)
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(batch.init[n][row])
        anchor = [(batch.init[n][row] if batch.anchor is None else batch.anchor[n][u]) for n in names]
        opt = torch.optim.SGD(model.parameters(), lr=solver.lr, momentum=solver.momentum,
                              weight_decay=solver.weight_decay)
        if batch.momentum is not None:  # the unit's kept buffer (torch's SGD continues from it)
            for n, p in model.named_parameters():
                opt.state[p]["momentum_buffer"] = batch.momentum[n][u].clone()
        for s in range(int(batch.steps[u])):
            real = int(batch.count[u, s])
            idx = batch.global_index[u, s, :real]
            xb = x[idx]
            if channels_last and xb.dim() == 4:
                xb = xb.contiguous(memory_format=torch.channels_last)
            with autocast(x.device, precision):
                pred = model(xb)
            loss = (loss_fn(pred, y[idx]) * batch.weight[u, s, :real]).sum() / real
            if solver.prox_mu > 0:
                loss = loss + 0.5 * solver.prox_mu * sum(
                    ((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True)
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        for n, p in model.named_parameters():
            out[n][u] = p.detach()
            if batch.momentum is not None:
                batch.momentum[n][u] = opt.state[p]["momentum_buffer"]
    return out


# -- the vectorised path ------------------------------------------------------------------------
def train_vectorized(module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: Batch, solver: Solver,
                     loss_fn: LossFn, max_units: int = MAX_UNITS, precision: str = "fp32") -> Params:
    """All units at once: per step, ``vmap(grad(loss))`` over stacked parameters and a padded batch.

    Units are sorted by their number of steps so that the units still training at step s are a
    prefix of the stack: updates act on views, with no gather/scatter of parameters.

    No padded work: at each step the batch is cut to the longest real batch of the units still training
    (:func:`step_groups`; at the FedRC paper's scale, 160 samples in batches of 128, the second step computes 32
    rows, not 128); when the units' real batches differ so much that one width would waste more than
    ``PAD_TOLERANCE`` of the rows, they run in groups of similar widths (gathered and written back).
    """
    U = len(batch.steps)
    if max_units < U:
        parts = [np.arange(i, min(i + max_units, U)) for i in range(0, U, max_units)]
        res = []
        for p in parts:
            part = _slice_batch(batch, p)
            res.append(train_vectorized(module, x, y, part, solver, loss_fn, max_units, precision))
            if batch.momentum is not None and part.momentum is not None:
                for k, v in batch.momentum.items():
                    v[p[0]:p[-1] + 1] = part.momentum[k]
        return {k: torch.cat([r[k] for r in res]) for k in res[0]}
    order_np = np.argsort(-batch.steps, kind="stable")
    order = to_device(order_np, x.device)
    steps = batch.steps[order_np]
    params = batch.start(order)
    anchor = batch.centre(order) if solver.prox_mu else None
    gidx, weight, count = batch.global_index[order], batch.weight[order], batch.count[order]
    bufs = {k: torch.zeros_like(v) for k, v in params.items()} if solver.momentum > 0 else None
    if bufs is not None and batch.momentum is not None:  # client_momentum=keep: continue from the kept buffers
        bufs = {k: v.index_select(0, order) for k, v in batch.momentum.items()}

    def unit_loss(p: Params, xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor, nb: torch.Tensor):
        with autocast(x.device, precision):
            out = functional_call(module, p, (xb,))
        return (loss_fn(out, yb) * wb).sum() / nb

    grad_fn = vmap(grad(unit_loss))
    real = batch.real_counts()[order_np]  # [U, S] on the host
    active = len(steps)

    def update(sel: slice | torch.Tensor, s: int, width: int) -> None:
        """One SGD step of the units ``sel`` (a prefix slice: views; an index: gathered, then written back)."""
        view = {k: v[sel] for k, v in params.items()}
        idx = gidx[sel, s, :width]
        g = grad_fn(view, x[idx], y[idx], weight[sel, s, :width], count[sel, s])
        for k, p in view.items():
            d = g[k]
            if solver.weight_decay:
                d = d.add(p, alpha=solver.weight_decay)
            if anchor is not None:
                d = d.add(p - anchor[k][sel], alpha=solver.prox_mu)
            if bufs is not None:
                buf = bufs[k][sel]
                buf.mul_(solver.momentum).add_(d)
                d = buf
                if not isinstance(sel, slice):
                    bufs[k][sel] = buf
            p.sub_(d, alpha=solver.lr)
            if not isinstance(sel, slice):
                params[k][sel] = p

    with torch.no_grad():
        for s in range(int(steps.max(initial=0))):
            while active > 0 and steps[active - 1] <= s:
                active -= 1
            for group, width in step_groups(real[:active, s]):
                sel = slice(0, active) if group is None else to_device(group, x.device)
                update(sel, s, width)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(U, device=order.device)
    if bufs is not None and batch.momentum is not None:
        for k, v in batch.momentum.items():
            v.copy_(bufs[k][inverse])
    return {k: v[inverse] for k, v in params.items()}


PAD_TOLERANCE = 0.05  # share of padded rows a training step may compute before its units are grouped


def step_groups(real: np.ndarray, tolerance: float = PAD_TOLERANCE) -> list[tuple[np.ndarray | None, int]]:
    """How one vectorised step covers units with ``real`` [a] real samples each: (units, width) calls, units None
    for all ``a`` at once. One call at the longest real batch when that computes at most ``1 + tolerance`` times
    the real rows; else groups of units with similar widths, widest first, each within the tolerance."""
    total = int(real.sum())
    widest = int(real.max(initial=0))
    if widest * len(real) <= (1 + tolerance) * total or len(real) <= 1:
        return [(None, max(widest, 1))]
    order = np.argsort(-real, kind="stable")
    groups, start = [], 0
    while start < len(order):
        width, rows, end = int(real[order[start]]), 0, start
        while end < len(order) and width * (end + 1 - start) <= (1 + tolerance) * (rows + real[order[end]]):
            rows += int(real[order[end]])
            end += 1
        groups.append((np.sort(order[start:end]), max(width, 1)))
        start = end
    return groups


def auto_path(model_name: str, device: str | torch.device = "cpu", precision: str = "fp32",
              activation_bytes: int | None = None) -> str:
    """The fast path per model family and device. On the CPU: hand-written batched backprop for dense models
    (fp32 only), a process pool for CNNs (compute bound), torch.func vectorisation for anything else. On an
    accelerator: the vectorised cohort, or units one by one with dense convolutions (``unit-loop``) for a model
    whose ``activation_bytes`` per sample (engine.memory.footprint) are too large to gain from vectorising
    (engine.looped.prefers_loop: ResNet-18, MobileNet-V2)."""
    if torch.device(device).type != "cpu":
        from fedcluster.engine.looped import prefers_loop  # imports this module

        return "unit-loop" if prefers_loop(activation_bytes) else "vectorized"
    if model_name in ("logistic", "linear", "linear-nobias", "mlp"):
        return "dense" if precision == "fp32" else "vectorized"
    return "pool" if "cnn" in model_name else "vectorized"
