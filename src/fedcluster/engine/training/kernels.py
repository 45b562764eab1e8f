"""The training kernels: many units (client × model pairs) trained at once, the same models on every path.

A *unit* is one model trained on one client's data with per-sample weights (1 for FedAvg; the
E-step responsibilities γ_{i,j;k} for FedEM/FedRC). The paths:

* ``sequential`` (:func:`train_sequential`) – the reference: one ``nn.Module`` and ``torch.optim.SGD`` per
  unit, one unit after the other (what FL frameworks do, minus their DataLoader/deep-copy overhead);
* ``vectorized`` (:func:`train_vectorized`) – all units' parameters stacked, one ``torch.func.vmap(grad(...))``
  call per step; the fast path for linear models and MLPs, whose per-client work is too small for a CPU;
* ``dense`` (:mod:`fedcluster.engine.training.dense`) and ``unit-loop``
  (:mod:`fedcluster.engine.training.looped`), and ``pool``,
  the sequential path split over worker processes by the in-process backend
  (:mod:`fedcluster.engine.trainers.local`).

A :class:`Batch` holds one training call's units on the device of the federation's tensors: batches,
parameters and updates stay there. ``precision="bf16"`` runs forward and backward under ``torch.autocast``
(bfloat16) with fp32 parameters, updates and results. :func:`auto_path` picks the path per model and device.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, grad_and_value, vmap

from fedcluster.engine.memory import MAX_UNITS
from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.batches import Schedule
from fedcluster.engine.training.pooling import fast_pooling
from fedcluster.engine.training.precision import autocast
from fedcluster.engine.training.sgd import sgd_step
from fedcluster.engine.transfer import to_device

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (outputs, targets) -> per-sample loss


class PerSampleLoss:
    """Cross-entropy (classification) or squared error (regression) per sample of ``out`` [B, C]; picklable for the
    pool. The cross-entropy is the negated log-softmax at the label: ``F.cross_entropy``'s values and gradients bit
    for bit, without its ``ignore_index`` masking (under ``vmap`` three operators fewer in each pass)."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.task == "classification":
            return -torch.log_softmax(out.float(), -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
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
    # [U, S] each step's mini-batch loss (before the step's update, without the proximal term), written by the
    # training paths when a method asks for it (NaN past a unit's last step); None: not recorded
    step_losses: torch.Tensor | None = None

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
        # need a loss that returns [batch, K] (e.g. engine.training.multihead's shared body + K heads).
        gathered = _gather_weights(weights, schedule.local)
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


def _gather_weights(weights: list, local: torch.Tensor) -> torch.Tensor:
    """[U, S, B] (or [U, S, B, K]): unit u's weight of its local sample ``local[u, s, b]``, in one indexing of the
    units' weights joined end to end (a padded lane reads the unit's first weight, as indexing each unit's own
    weights would; the mask zeroes it)."""
    if all(isinstance(wu, np.ndarray) for wu in weights):  # one conversion (the same float32 rounding)
        joined = torch.from_numpy(np.concatenate(weights).astype(np.float32, copy=False))
    else:
        joined = torch.cat([torch.as_tensor(wu, dtype=torch.float32).cpu() for wu in weights])
    if not len(joined):
        return joined.new_zeros((*local.shape, *joined.shape[1:]))
    starts = np.cumsum([0, *(len(wu) for wu in weights[:-1])])
    rows = (local + torch.from_numpy(starts).view(-1, 1, 1)).clamp_(max=len(joined) - 1)
    return joined[rows]


def slice_batch(b: Batch, idx: np.ndarray) -> Batch:
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
                     loss_fn: LossFn, channels_last: bool = False, precision: str = "fp32",
                     out: Params | None = None) -> Params:
    """One unit at a time with ``torch.optim.SGD``: the plain reference implementation. ``out``: the result stack
    to fill (default: a new one).

    Each unit trains in place in its row of the result stack (the model's parameters are views of it) and its
    kept momentum buffer in place in ``batch.momentum``, so a unit costs no copy beyond its starting point's."""
    out = batch.empty_out() if out is None else out
    model = fast_pooling(copy.deepcopy(module))  # the same numbers (engine.training.pooling)
    if channels_last:  # NHWC convolution weights and inputs (oneDNN's fast layout on the CPU)
        model = model.to(memory_format=torch.channels_last)
    names = [n for n, _ in model.named_parameters()]
    for u in range(len(batch.steps)):
        row = batch.start_of(u)
        with torch.no_grad():
            for n, p in model.named_parameters():
                if out[n][u].stride() == p.stride():  # same layout: the unit trains in its result row
                    p.data = out[n][u]
                p.copy_(batch.init[n][row])
        anchor = [(batch.init[n][row] if batch.anchor is None else batch.anchor[n][u]) for n in names]
        opt = torch.optim.SGD(model.parameters(), lr=solver.lr, momentum=solver.momentum,
                              weight_decay=solver.weight_decay)
        if batch.momentum is not None:  # the unit's kept buffer (torch's SGD continues from it, in place)
            for n, p in model.named_parameters():
                opt.state[p]["momentum_buffer"] = batch.momentum[n][u]
        for s in range(int(batch.steps[u])):
            real = int(batch.count[u, s])
            idx = batch.global_index[u, s, :real]
            xb = x[idx]
            if channels_last and xb.dim() == 4:
                xb = xb.contiguous(memory_format=torch.channels_last)
            with autocast(x.device, precision):
                pred = model(xb)
            loss = (loss_fn(pred, y[idx]) * batch.weight[u, s, :real]).sum() / real
            if batch.step_losses is not None:
                batch.step_losses[u, s] = loss.detach()
            if solver.prox_mu > 0:
                loss = loss + 0.5 * solver.prox_mu * sum(
                    ((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True)
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        for n, p in model.named_parameters():
            if p.data_ptr() != out[n][u].data_ptr():
                out[n][u] = p.detach()
            if batch.momentum is not None:
                buf = opt.state[p]["momentum_buffer"]
                if buf.data_ptr() != batch.momentum[n][u].data_ptr():
                    batch.momentum[n][u] = buf
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
            part = slice_batch(batch, p)
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

    recording = batch.step_losses is not None
    grad_fn = vmap(grad_and_value(unit_loss) if recording else grad(unit_loss))
    real = batch.real_counts()[order_np]  # [U, S] on the host
    active = len(steps)

    def update(sel: slice | torch.Tensor, s: int, width: int) -> None:
        """One SGD step of the units ``sel`` (a prefix slice: views; an index: gathered, then written back)."""
        view = {k: v[sel] for k, v in params.items()}
        idx = gidx[sel, s, :width]
        g = grad_fn(view, x[idx], y[idx], weight[sel, s, :width], count[sel, s])
        if recording:
            g, value = g
            batch.step_losses[order[sel], s] = value.detach().to(batch.step_losses.dtype)
        names = list(view)
        unit_bufs = None if bufs is None else [bufs[k][sel] for k in names]
        sgd_step([view[k] for k in names], [g[k] for k in names], solver, unit_bufs,
                 None if anchor is None else [anchor[k][sel] for k in names])
        if not isinstance(sel, slice):  # gathered copies: written back
            for i, k in enumerate(names):
                params[k][sel] = view[k]
                if unit_bufs is not None:
                    bufs[k][sel] = unit_bufs[i]

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
    (engine.training.looped.prefers_loop: ResNet-18, MobileNet-V2)."""
    if torch.device(device).type != "cpu":
        from fedcluster.engine.training.looped import prefers_loop  # imports this module

        return "unit-loop" if prefers_loop(activation_bytes) else "vectorized"
    if model_name in ("logistic", "linear", "linear-nobias", "mlp"):
        return "dense" if precision == "fp32" else "vectorized"
    return "pool" if "cnn" in model_name else "vectorized"
