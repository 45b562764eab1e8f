"""Local training of many units (client × model pairs) at once.

A *unit* is one model trained on one client's data with per-sample weights (1 for FedAvg; the
E-step responsibilities γ_{i,j;k} for FedEM/FedRC). Three paths give the same models:

* ``sequential`` – the reference: one ``nn.Module`` and ``torch.optim.SGD`` per unit, one unit
  after the other (what FL frameworks do, minus their DataLoader/deep-copy overhead);
* ``vectorized`` – all units' parameters stacked, one ``torch.func.vmap(grad(...))`` call per
  step; the fast path for linear models and MLPs, whose per-client work is too small for a CPU;
* ``pool`` – the sequential path split over worker processes with one thread each; the fast path
  for CNNs, which are compute bound and scale better over processes than over intra-op threads.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from fedcluster.engine.batches import Schedule, make_schedule
from fedcluster.engine.dense import dense_layers, train_dense
from fedcluster.engine.multihead import MultiHeadLoss
from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (outputs, targets) -> per-sample loss


def per_sample_loss(task: str) -> LossFn:
    if task == "classification":
        return lambda out, y: F.cross_entropy(out, y, reduction="none")
    return lambda out, y: (out.squeeze(-1) - y) ** 2


@dataclass
class Batch:
    """Unit-major tensors for one training call."""

    init: Params  # stacked [U, ...]
    anchor: Params  # stacked [U, ...] proximal centre (= init unless given)
    global_index: torch.Tensor  # [U, S, B] rows of the federation's train tensors
    weight: torch.Tensor  # [U, S, B] (or [U, S, B, K]) per-sample weight × padding mask
    count: torch.Tensor  # [U, S] real samples per step (loss denominators)
    steps: np.ndarray  # [U]


def build_batch(
    init: Params, clients: np.ndarray, ptr: np.ndarray, schedule: Schedule,
    weights: list[np.ndarray] | None, anchor: Params | None,
) -> Batch:
    offsets = torch.as_tensor(ptr[clients], dtype=torch.long).view(-1, 1, 1)
    w = schedule.mask.clone()
    if weights is not None:
        # [n_i] arrays weight each sample; [n_i, K] arrays weight each (sample, output head) pair and
        # need a loss that returns [batch, K] (e.g. engine.multihead's shared body + K heads).
        gathered = torch.stack([torch.as_tensor(wu, dtype=torch.float32)[schedule.local[u]]
                                for u, wu in enumerate(weights)])
        w = gathered * (w if gathered.dim() == 3 else w.unsqueeze(-1))
    return Batch(
        init=init, anchor=anchor if anchor is not None else init,
        global_index=schedule.local + offsets, weight=w, count=schedule.mask.sum(-1).clamp(min=1.0),
        steps=schedule.steps,
    )


class Trainer:
    """Trains stacks of units on a federation's training data with one of the three paths."""

    def __init__(self, module: nn.Module, x: torch.Tensor, y: torch.Tensor, ptr: np.ndarray, task: str,
                 seed: int, path: str = "vectorized", workers: int = 2,
                 channels_last: bool = False, max_units: int = 256) -> None:
        self.module, self.x, self.y, self.ptr = module, x, y, ptr
        self.sizes = np.diff(ptr)
        self.task, self.seed, self.path, self.workers = task, seed, path, workers
        self.loss = per_sample_loss(task)
        self.channels_last = channels_last
        self.max_units = max_units
        self._pool: mp.pool.Pool | None = None
        self._siblings: list[Trainer] = []
        self.nonfinite: set[int] = set()  # clients whose trained units came back NaN/inf (engine.divergence)
        # the hand-written dense path (Flatten/Linear/ReLU models only; others fall back to vectorized)
        self.dense = dense_layers(module) if path == "dense" else None

    def sibling(self, module: nn.Module, loss: LossFn) -> Trainer:
        """A trainer on the same data and path with another module and per-sample loss (closed with
        this one); e.g. a shared body with K heads whose loss returns [batch, K]."""
        t = Trainer(module, self.x, self.y, self.ptr, self.task, self.seed, self.path, self.workers,
                    self.channels_last, self.max_units)
        t.loss = loss
        t.nonfinite = self.nonfinite
        # the dense path knows the standard losses and engine.multihead's per-head loss
        t.dense = dense_layers(module) if self.path == "dense" and isinstance(loss, MultiHeadLoss) else None
        self._siblings.append(t)
        return t

    def train(
        self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
        weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
    ) -> Params:
        """Train unit u (initial parameters ``init[u]``) on client ``clients[u]``; return the stack."""
        clients = np.asarray(clients, dtype=np.int64)
        sched = make_schedule(self.sizes, clients, self.seed, round_, solver.epochs, solver.batch_size,
                              stream, solver.max_steps)
        batch = build_batch(init, clients, self.ptr, sched, weights, anchor)
        if self.path == "sequential":
            out = train_sequential(self.module, self.x, self.y, batch, solver, self.loss, self.channels_last)
        elif self.path in ("pool", "pool-vectorized"):
            out = self._train_pool(batch, solver)
        elif self.dense is not None:
            out = train_dense(self.dense, self.x, self.y, batch, solver, self.task)
        else:
            out = train_vectorized(self.module, self.x, self.y, batch, solver, self.loss, self.max_units)
        self._watch(out, clients)
        return out

    def _watch(self, out: Params, clients: np.ndarray) -> None:
        """Remember the clients whose units diverged (the runner stops the run; methods never see this)."""
        if len(clients) == 0:
            return
        bad = torch.zeros(len(clients), dtype=torch.bool)
        for v in out.values():
            bad |= ~torch.isfinite(v.reshape(len(clients), -1)).all(1)
        self.nonfinite.update(int(c) for c in clients[bad.numpy()])

    def take_nonfinite(self) -> list[int]:
        """The clients recorded by :meth:`_watch` since the last call, sorted."""
        out = sorted(self.nonfinite)
        self.nonfinite.clear()
        return out

    # -- process pool ------------------------------------------------------------------------
    def _train_pool(self, batch: Batch, solver: Solver) -> Params:
        if self._pool is None:
            ctx = mp.get_context("fork")
            _WORKER.update(module=self.module, x=self.x, y=self.y, loss=self.loss, cl=self.channels_last,
                           vectorized=self.path == "pool-vectorized", max_units=self.max_units)
            _install_quiet_hook()  # before forking: the workers inherit it too
            self._pool = ctx.Pool(self.workers, initializer=_init_worker)
        U = len(batch.steps)
        # Hand units out longest first, round-robin, so both workers get similar work.
        order = np.argsort(-batch.steps, kind="stable")
        parts = [order[i:: self.workers] for i in range(self.workers)]
        parts = [p for p in parts if len(p)]
        jobs = [self._pool.apply_async(_pool_job, (_slice_batch(batch, p), solver)) for p in parts]
        out = {k: torch.empty_like(v) for k, v in batch.init.items()}
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
            self._pool.terminate()
            self._pool = None


_WORKER: dict = {}


def _init_worker() -> None:
    """One thread per worker; Ctrl-C is the parent's to handle (workers would print a traceback each)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)


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
        return train_vectorized(w["module"], w["x"], w["y"], batch, solver, w["loss"], w["max_units"])
    return train_sequential(w["module"], w["x"], w["y"], batch, solver, w["loss"], w["cl"])


def _slice_batch(b: Batch, idx: np.ndarray) -> Batch:
    t = torch.as_tensor(idx)
    steps = b.steps[idx]
    S = int(steps.max(initial=1))
    return Batch(
        init={k: v[t] for k, v in b.init.items()}, anchor={k: v[t] for k, v in b.anchor.items()},
        global_index=b.global_index[t, :S], weight=b.weight[t, :S], count=b.count[t, :S], steps=steps,
    )


# -- the reference path -------------------------------------------------------------------------
def train_sequential(module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: Batch, solver: Solver,
                     loss_fn: LossFn, channels_last: bool = False) -> Params:
    """One unit at a time with ``torch.optim.SGD``: the plain reference implementation."""
    out = {k: torch.empty_like(v) for k, v in batch.init.items()}
    model = copy.deepcopy(module)
    names = [n for n, _ in model.named_parameters()]
    for u in range(len(batch.steps)):
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(batch.init[n][u])
        anchor = [batch.anchor[n][u] for n in names]
        opt = torch.optim.SGD(model.parameters(), lr=solver.lr, momentum=solver.momentum,
                              weight_decay=solver.weight_decay)
        for s in range(int(batch.steps[u])):
            real = int(batch.count[u, s])
            idx = batch.global_index[u, s, :real]
            xb = x[idx]
            if channels_last and xb.dim() == 4:
                xb = xb.contiguous(memory_format=torch.channels_last)
            loss = (loss_fn(model(xb), y[idx]) * batch.weight[u, s, :real]).sum() / real
            if solver.prox_mu > 0:
                loss = loss + 0.5 * solver.prox_mu * sum(
                    ((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True)
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        for n, p in model.named_parameters():
            out[n][u] = p.detach()
    return out


# -- the vectorised path ------------------------------------------------------------------------
def train_vectorized(module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: Batch, solver: Solver,
                     loss_fn: LossFn, max_units: int = 256) -> Params:
    """All units at once: per step, ``vmap(grad(loss))`` over stacked parameters and a padded batch.

    Units are sorted by their number of steps so that the units still training at step s are a
    prefix of the stack: updates act on views, with no gather/scatter of parameters.
    """
    U = len(batch.steps)
    if max_units < U:
        parts = [np.arange(i, min(i + max_units, U)) for i in range(0, U, max_units)]
        res = [train_vectorized(module, x, y, _slice_batch(batch, p), solver, loss_fn, max_units)
               for p in parts]
        return {k: torch.cat([r[k] for r in res]) for k in res[0]}
    order = torch.as_tensor(np.argsort(-batch.steps, kind="stable"))
    steps = batch.steps[order.numpy()]
    params = {k: v[order].clone() for k, v in batch.init.items()}
    anchor = {k: v[order] for k, v in batch.anchor.items()}
    gidx, weight, count = batch.global_index[order], batch.weight[order], batch.count[order]
    bufs = {k: torch.zeros_like(v) for k, v in params.items()} if solver.momentum > 0 else None

    def unit_loss(p: Params, xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor, nb: torch.Tensor):
        return (loss_fn(functional_call(module, p, (xb,)), yb) * wb).sum() / nb

    grad_fn = vmap(grad(unit_loss))
    active = len(steps)
    with torch.no_grad():
        for s in range(int(steps.max(initial=0))):
            while active > 0 and steps[active - 1] <= s:
                active -= 1
            view = {k: v[:active] for k, v in params.items()}
            idx = gidx[:active, s]
            g = grad_fn(view, x[idx], y[idx], weight[:active, s], count[:active, s])
            for k, p in view.items():
                d = g[k]
                if solver.weight_decay:
                    d = d.add(p, alpha=solver.weight_decay)
                if solver.prox_mu:
                    d = d.add(p - anchor[k][:active], alpha=solver.prox_mu)
                if bufs is not None:
                    buf = bufs[k][:active]
                    buf.mul_(solver.momentum).add_(d)
                    d = buf
                p.sub_(d, alpha=solver.lr)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(U)
    return {k: v[inverse] for k, v in params.items()}


def auto_path(model_name: str) -> str:
    """The fast path per model family: hand-written batched backprop for dense models, a process pool for
    CNNs (compute bound), torch.func vectorisation for anything else."""
    if model_name in ("logistic", "linear", "linear-nobias", "mlp"):
        return "dense"
    return "pool" if "cnn" in model_name else "vectorized"
