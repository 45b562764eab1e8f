"""The fast path for dense models (logistic/linear regression, MLPs): hand-written batched backprop.

For models whose body is Flatten/Linear/ReLU layers and whose head is one Linear layer, local SGD of
many units is a handful of batched matmuls per step. Writing the backward pass by hand lets the
plain-SGD weight update be fused into the gradient matmul (``W.baddbmm_(dZᵀ, H, alpha=-lr)``), so a
step streams each weight matrix once; units are trained in chunks whose weights fit in the CPU's
last-level cache. The result equals the sequential reference path to float tolerance (tested).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.sgd import sgd_step

CACHE_BYTES = 6 * 2**20  # weights of one chunk of units (with activations, well inside a 16–32 MiB L3)


def dense_layers(module: nn.Module) -> list[list[str]] | None:
    """Parameter-name prefixes of the Linear layers, one group per layer, if ``module`` is a
    Flatten/Linear/ReLU stack ending in a Linear layer (a SplitModel), or such a body with K Linear heads
    (engine.training.multihead's MultiHead: its last group lists the K heads); else None."""
    heads = getattr(module, "heads", None)
    if isinstance(heads, nn.ModuleList):
        body = _linear_prefixes(module.body, "body")
        if body is None or (body[0] and not body[1]) or not all(isinstance(h, nn.Linear) for h in heads):
            return None
        return [[n] for n in body[0]] + [[f"heads.{k}" for k in range(len(heads))]]
    found = _linear_prefixes(module, "")
    return [[n] for n in found[0]] if found and found[0] and not found[1] else None


def _linear_prefixes(module: nn.Module, prefix: str) -> tuple[list[str], bool] | None:
    """(prefixes of the Linear layers, whether a ReLU follows the last one) if the leaf modules are
    Flatten/Linear/ReLU with a ReLU between Linear layers and none before the first; else None."""
    names: list[str] = []
    ends_relu = False
    for name, m in module.named_modules():
        if next(m.children(), None) is not None:
            continue  # containers (SplitModel, Sequential)
        if isinstance(m, nn.Linear):
            if names and not ends_relu:
                return None  # two Linear layers without a ReLU between them
            names.append(".".join(p for p in (prefix, name) if p))
            ends_relu = False
        elif isinstance(m, nn.ReLU):
            if not names:
                return None  # a ReLU on the input: not what the hand-written pass computes
            ends_relu = True
        elif not isinstance(m, nn.Flatten):
            return None
    return names, ends_relu


def chunk_units(params: Params) -> int:
    """Units per chunk: as many as fit CACHE_BYTES, rounded to a multiple of the thread count (batched
    matmuls split the units over threads; an odd count leaves one thread idle for a whole unit)."""
    per_unit = sum(v[0].numel() * v.element_size() for v in params.values())
    threads = torch.get_num_threads()
    return max(threads, CACHE_BYTES // max(per_unit, 1) // threads * threads)


@torch.no_grad()
def train_dense(layers: list[list[str]], x: torch.Tensor, y: torch.Tensor, batch, solver: Solver, task: str) -> Params:
    """Train all units of ``batch`` (see kernels.Batch); same maths as ``train_sequential``.

    Units are ordered longest-first, so in every chunk the active units shrink from the end. A chunk's
    weights are gathered, trained in place and scattered back while they are cache-hot.
    """
    U = len(batch.steps)
    order = np.argsort(-batch.steps, kind="stable")
    out = batch.empty_out()
    flat = x.reshape(x.shape[0], -1)
    size = chunk_units(batch.init)
    for lo in range(0, U, size):
        t = torch.as_tensor(order[lo:lo + size])
        state = batch.start(t)
        _train_chunk(layers, flat, y, batch, order[lo:lo + size], state, solver, task)
        for k, v in state.items():
            out[k].index_copy_(0, t, v)
    return out


def _train_chunk(layers: list[list[str]], x: torch.Tensor, y: torch.Tensor, batch, units: np.ndarray, state: Params,
                 solver: Solver, task: str) -> None:
    """Train ``units`` (sorted by decreasing step count) in place on their weights ``state``."""
    t = torch.as_tensor(units)
    steps = batch.steps[units]
    # a group of K heads trains as one Linear layer with K·C outputs (copied back at the end)
    W = [_joined(state, g, "weight") for g in layers]  # [u, out, in]
    # [u, out]; a layer without bias keeps a zero bias that is never updated nor returned
    has_bias = [f"{g[0]}.bias" in state for g in layers]
    b = [_joined(state, g, "bias") if h else torch.zeros(len(t), w.shape[1])
         for g, w, h in zip(layers, W, has_bias, strict=True)]
    heads, out_dim = len(layers[-1]), W[-1].shape[1] // len(layers[-1])
    plain = solver.momentum == 0 and solver.weight_decay == 0 and solver.prox_mu == 0
    kept = None
    if not plain:
        anchor = batch.centre(t)
        aW = [_joined(anchor, g, "weight") for g in layers]
        ab = [_joined(anchor, g, "bias") if h else bb for g, h, bb in zip(layers, has_bias, b, strict=True)]
        bufs = [torch.zeros_like(v) for pair in zip(W, b, strict=True) for v in pair] if solver.momentum else None
        kept = {k: v.index_select(0, t) for k, v in batch.momentum.items()} if bufs and batch.momentum else None
        if kept is not None:  # client_momentum=keep: continue from the units' kept buffers
            bufs = [_joined(kept, g, kind) if kind == "weight" or h else torch.zeros_like(b[i])
                    for i, (g, h) in enumerate(zip(layers, has_bias, strict=True)) for kind in ("weight", "bias")]
    gidx, weight, count = batch.global_index[t], batch.weight[t], batch.count[t]
    active, lr = len(steps), solver.lr
    for s in range(int(steps.max(initial=0))):
        while active > 0 and steps[active - 1] <= s:
            active -= 1
        rows = gidx[:active, s]
        h = x.index_select(0, rows.reshape(-1)).view(active, rows.shape[1], -1)
        hs, zs = [h], []
        for i in range(len(layers)):
            z = torch.baddbmm(b[i][:active].unsqueeze(1), hs[-1], W[i][:active].transpose(1, 2))
            zs.append(z)
            if i < len(layers) - 1:
                hs.append(z.clamp_min(0))
        w = weight[:active, s]  # [a, B] or, per head, [a, B, K]
        scale = (w if w.dim() == 3 else w.unsqueeze(-1)) / count[:active, s, None, None]  # w_j(k) / n
        yb = y[rows].unsqueeze(-1).unsqueeze(-1).expand(-1, -1, heads, 1)  # [a, B, K, 1]
        z = zs[-1].view(active, -1, heads, out_dim)
        if batch.step_losses is not None:  # the step's data loss, before the update (a method asked for it)
            per = (torch.logsumexp(z, -1) - z.gather(-1, yb).squeeze(-1) if task == "classification"
                   else ((z - yb) ** 2).sum(-1))  # [a, B, K] per-sample losses
            batch.step_losses[t[:active], s] = (per * scale).sum((1, 2)).to(batch.step_losses.dtype)
        if task == "classification":
            dz = z.softmax(-1)
            dz.scatter_add_(-1, yb, torch.full_like(dz[..., :1], -1.0))
        else:
            dz = 2 * (z - yb)
        dz = dz.mul_(scale.unsqueeze(-1)).view_as(zs[-1])
        for i in reversed(range(len(layers))):
            dh = torch.bmm(dz, W[i][:active]) if i > 0 else None  # before W[i] changes
            if plain:
                W[i][:active].baddbmm_(dz.transpose(1, 2), hs[i], alpha=-lr)
                if has_bias[i]:
                    b[i][:active].sub_(dz.sum(1), alpha=lr)
            else:
                gW = torch.bmm(dz.transpose(1, 2), hs[i])
                pairs = ((W[i], gW, aW[i]), (b[i], dz.sum(1), ab[i]))[: 2 if has_bias[i] else 1]
                for j, (p, g, a) in enumerate(pairs):
                    sgd_step([p[:active]], [g], solver, [bufs[2 * i + j][:active]] if bufs else None, [a[:active]])
            if dh is not None:
                dz = torch.ops.aten.threshold_backward(dh, zs[i - 1], 0.0)  # dh · 1[z > 0]
    if not plain and kept is not None and bufs is not None:  # the buffers back to the batch, per parameter
        for i, (g, h) in enumerate(zip(layers, has_bias, strict=True)):
            for j, kind in enumerate(("weight", "bias")[: 2 if h else 1]):
                _split_into(kept, g, kind, bufs[2 * i + j])
        for k, v in kept.items():
            batch.momentum[k].index_copy_(0, t, v)
    for g, w_, b_, h in zip(layers, W, b, has_bias, strict=True):
        if len(g) > 1:  # scatter a joined head group back to its K heads
            for k, name in enumerate(g):
                rows_k = slice(k * out_dim, (k + 1) * out_dim)
                state[f"{name}.weight"].copy_(w_[:, rows_k])
                if h:
                    state[f"{name}.bias"].copy_(b_[:, rows_k])


def _joined(params: Params, group: list[str], kind: str) -> torch.Tensor:
    """One layer's ``kind`` stack [u, out, ...] (a view), or the K heads' stacks joined along ``out``."""
    if len(group) == 1:
        return params[f"{group[0]}.{kind}"]
    return torch.cat([params[f"{n}.{kind}"] for n in group], 1)


def _split_into(params: Params, group: list[str], kind: str, joined: torch.Tensor) -> None:
    """Copy ``joined`` (a layer's ``kind`` stack, or the K heads' stacks joined along ``out``) into ``params``."""
    rows = joined.shape[1] // len(group)
    for k, name in enumerate(group):
        params[f"{name}.{kind}"].copy_(joined[:, k * rows:(k + 1) * rows])


