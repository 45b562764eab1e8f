"""Fast no-grad forward passes of K stacked models (E-steps and evaluation of the clustered methods).

On the CPU, PyTorch's eager forward of convolutional models is slow (NCHW max-pooling alone is about half of
it), so the K loss passes of an E-step would cost more than the FedAvg round they are compared with.
A traced, frozen, inference-optimised copy of each model (oneDNN fused conv + ReLU, blocked layouts) runs
3–4× faster, takes ~50 ms to build and agrees with the eager forward to ~1e-7; it runs ``CHUNK`` rows at a time
(cache-sized). Models without convolutions run eagerly. The last built set is cached, so the evaluation after
round t and the E-step of round t + 1, which use the same models, build it once.

On an accelerator a pass is launch-bound, not compute-bound: the K models run as one ``torch.func.vmap`` over
their stacked parameters (a shared body once, its K heads vmapped), on as many rows per call as the free
device memory allows (:func:`inference_rows`; a whole E-step or split is usually one call). Rows that each
use their own unit's models (a client's fine-tuned or personal models, a hard cluster's model, a cluster's
feature extractor) run through :meth:`StackForward.grouped`: units vmapped over their padded rows, as many
units per call as the memory holds, never one call per client or cluster.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from fedcluster.engine.memory import free_bytes, inference_row_bytes
from fedcluster.engine.params import Params

Forward = Callable[[torch.Tensor], torch.Tensor]
CHUNK = 256  # CPU rows per call: big enough to amortise per-call costs, small enough to stay in cache


def row_budget(device: torch.device) -> int | None:
    """Bytes one vectorised inference call may use on ``device``: a share of its free memory; None on the CPU
    (traced per-model forwards, ``CHUNK`` rows at a time)."""
    return free_bytes(device)


def inference_rows(budget: int, k: int, row_bytes: int, fixed: int = 0) -> int:
    """Rows per vectorised forward of ``k`` models: what fits ``budget`` bytes after ``fixed`` bytes (the
    models' own copies) when each row costs ``row_bytes`` per model; at least one."""
    return max(1, (budget - fixed) // max(k * row_bytes, 1))


def has_conv(module: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.conv._ConvNd) for m in module.modules())


def _frozen(module: nn.Module, params: Params, example: torch.Tensor,
            traced: dict[int, nn.Module | None] | None = None, slot: int = 0) -> Forward:
    """An inference-optimised copy of ``module`` with ``params``; the eager copy if tracing fails. ``traced``: the
    traces of earlier calls by ``slot`` (a trace records the module's operations, not its weights: the next
    call with new weights copies them into the kept trace and freezes that, the costly part of a build skipped)."""
    traced = {} if traced is None else traced
    with torch.no_grad():
        try:
            if (graph := traced.get(slot)) is None and slot not in traced:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    graph = torch.jit.trace(copy.deepcopy(module).eval(), example, check_trace=False)
                traced[slot] = graph
            if graph is not None:  # fresh tensors: a frozen module keeps the ones it was frozen with
                for name, _ in [*graph.named_parameters(), *graph.named_buffers()]:
                    prefix, _, leaf = name.rpartition(".")
                    value = params[name] if name in params else module.get_buffer(name)
                    setattr(graph.get_submodule(prefix) if prefix else graph, leaf, value.detach().clone())
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return torch.jit.optimize_for_inference(torch.jit.freeze(graph))
        except Exception:  # noqa: BLE001 — any model tracing cannot handle runs eagerly
            traced[slot] = None
        copy_ = copy.deepcopy(module).eval()
        for name, p in copy_.named_parameters():
            p.copy_(params[name])
        return copy_


class StackForward:
    """``__call__(models, x, shared_body)`` → [K, N, out] for K stacked SplitModel parameter sets."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.fast = has_conv(module)
        self._key: tuple | None = None
        self._fns: list[Forward] = []
        self._row_bytes: dict[tuple[int, ...], int] = {}  # per-row bytes of one model, by input shape
        self._traces: dict[tuple[bool, tuple[int, ...]], dict[int, nn.Module | None]] = {}  # by (body, input shape)

    def _build(self, models: Params, example: torch.Tensor, shared_body: bool) -> list[Forward]:
        key = (shared_body, *((id(v), v._version) for v in models.values()))
        if key != self._key:
            k = len(next(iter(models.values())))
            traces = self._traces.setdefault((shared_body, tuple(example.shape[1:])), {})
            if shared_body:
                body = {n[5:]: v[0] for n, v in models.items() if n.startswith("body.")}
                self._fns = [_frozen(self.module.body, body, example, traces)]
            else:
                self._fns = [_frozen(self.module, {n: v[j] for n, v in models.items()}, example, traces, j)
                             for j in range(k)]
            self._key, self._models = key, models  # keep the tensors alive so their ids stay unique
        return self._fns

    def rows_per_pass(self, models: Params, x: torch.Tensor) -> int | None:
        """Rows per vectorised call of ``models`` on inputs like ``x`` (None on the CPU: ``CHUNK``)."""
        budget = row_budget(x.device)
        return None if budget is None else self._rows(models, x, budget)

    def _rows(self, models: Params, x: torch.Tensor, budget: int) -> int:
        self._row_bytes_for(x)
        shape = tuple(x.shape[1:])
        k = len(next(iter(models.values())))
        fixed = sum(v.numel() * v.element_size() for v in models.values())  # vmap may copy the K weights once
        return inference_rows(budget, k, self._row_bytes[shape], fixed)

    @torch.no_grad()
    def __call__(self, models: Params, x: torch.Tensor, shared_body: bool = False, chunk: int | None = None
                 ) -> torch.Tensor:
        """[K, N, out] outputs of the K models; ``chunk`` rows per call (default: ``CHUNK`` on the CPU, what
        the free memory allows on an accelerator)."""
        k = len(next(iter(models.values())))
        if not len(x):
            return functional_call(self.module, {n: v[0] for n, v in models.items()}, (x,)).unsqueeze(0).expand(
                k, -1, -1)
        budget = row_budget(x.device)
        if budget is not None:
            return self._vectorised(models, x, shared_body, chunk or self._rows(models, x, budget))
        chunk = CHUNK if chunk is None else chunk
        fns, heads = self._cpu_forwards(models, x, shared_body)
        outs = []
        for i in range(0, len(x), chunk):
            xb = x[i:i + chunk]
            if shared_body:
                z = fns[0](xb)
                outs.append(torch.stack([functional_call(self.module.head, h, (z,)) for h in heads]))
            else:
                outs.append(torch.stack([f(xb) for f in fns]))
        return torch.cat(outs, 1)

    @torch.no_grad()
    def chosen(self, models: Params, x: torch.Tensor, choice: np.ndarray, shared_body: bool = False) -> torch.Tensor:
        """[1, N, out]: row ``r`` of ``x`` through model ``choice[r]`` only, on the CPU (a hard assignment's
        predictions: each row costs one model's forward, not K). The same per-model forwards as ``__call__``
        (the cached inference-optimised copies for convolutional models, ``CHUNK`` rows a call)."""
        if row_budget(x.device) is not None:
            raise ValueError("chosen-model inference is the CPU path: on an accelerator run the K models vmapped")
        if not len(x):
            return self(models, x, shared_body)[:1]
        fns, heads = self._cpu_forwards(models, x, shared_body)
        feats = torch.cat([fns[0](x[i:i + CHUNK]) for i in range(0, len(x), CHUNK)]) if shared_body else None
        out: torch.Tensor | None = None
        for j in np.unique(choice):
            idx = torch.as_tensor(np.flatnonzero(choice == j))
            for i in range(0, len(idx), CHUNK):
                at = idx[i:i + CHUNK]
                o = functional_call(self.module.head, heads[j], (feats[at],)) if feats is not None else fns[j](x[at])
                if out is None:
                    out = o.new_empty((len(x), *o.shape[1:]))
                out[at] = o
        assert out is not None
        return out.unsqueeze(0)

    def _cpu_forwards(self, models: Params, x: torch.Tensor, shared_body: bool
                      ) -> tuple[list[Forward], list[dict[str, torch.Tensor]]]:
        """The CPU's per-model forwards (the body's alone when shared; inference-optimised copies for convolutional
        models) and the K heads' parameters."""
        k = len(next(iter(models.values())))
        heads = [{n[5:]: v[j] for n, v in models.items() if n.startswith("head.")} for j in range(k)]
        if self.fast:  # oneDNN freezing is a CPU optimisation
            return self._build(models, x[:2], shared_body), heads
        if shared_body:
            body = {n[5:]: v[0] for n, v in models.items() if n.startswith("body.")}
            return [lambda xb: functional_call(self.module.body, body, (xb,))], heads
        return [lambda xb, j=j: functional_call(self.module, {n: v[j] for n, v in models.items()}, (xb,))
                for j in range(k)], heads

    def _vectorised(self, models: Params, x: torch.Tensor, shared_body: bool, rows: int) -> torch.Tensor:
        """[K, N, out]: one vmapped call over the K models per ``rows`` rows (a shared body runs once)."""
        if shared_body:
            body = {n[5:]: v[0] for n, v in models.items() if n.startswith("body.")}
            heads = {n[5:]: v for n, v in models.items() if n.startswith("head.")}
            run_heads = vmap(lambda h, z: functional_call(self.module.head, h, (z,)), in_dims=(0, None))
            outs = [run_heads(heads, functional_call(self.module.body, body, (x[i:i + rows],)))
                    for i in range(0, len(x), rows)]
        else:
            run = vmap(lambda p, xb: functional_call(self.module, p, (xb,)), in_dims=(0, None))
            outs = [run(models, x[i:i + rows]) for i in range(0, len(x), rows)]
        return torch.cat(outs, 1)

    @torch.no_grad()
    def grouped(self, models: Params, x: torch.Tensor, rows: np.ndarray, group: np.ndarray) -> torch.Tensor:
        """[K', len(rows), out] on an accelerator: row ``rows[r]`` of ``x`` through the K' models of unit
        ``group[r]`` (``models`` are [M, K', ...]: a client's own models, or one cluster model with K' = 1).
        The units' rows are padded to the longest and as many units as the free memory allows run as one
        vmapped call (units outer, their K' models inner): the calls do not grow with the number of units."""
        units, kk = next(iter(models.values())).shape[:2]
        budget = row_budget(x.device)
        if budget is None:
            raise ValueError("grouped inference is the accelerator path: on the CPU run each unit's models")
        sizes = np.bincount(group, minlength=units)
        present = np.flatnonzero(sizes)
        if not len(rows):
            return self(_unit(models, 0), x[:0])
        longest = int(sizes.max())
        order = np.argsort(group, kind="stable")
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        slot = np.arange(len(rows)) - start[group[order]]  # position of each sorted row inside its unit
        padded = np.zeros((units, longest), np.int64)  # padding repeats row 0 of x, dropped afterwards
        padded[group[order], slot] = rows[order]
        unit_bytes = sum(v[0].numel() * v.element_size() for v in models.values())
        self._row_bytes_for(x)
        row_bytes = kk * self._row_bytes[tuple(x.shape[1:])]
        span = min(longest, max(1, (budget - unit_bytes) // max(row_bytes, 1)))  # slots per call
        fit = max(1, budget // max(span * row_bytes + unit_bytes, 1))  # units per call
        run = vmap(vmap(lambda p, xb: functional_call(self.module, p, (xb,)), in_dims=(0, None)), in_dims=(0, 0))
        device = x.device
        outs = []
        for i in range(0, len(present), fit):
            sel = torch.as_tensor(present[i:i + fit], device=device)
            unit_models = {n: v[sel] for n, v in models.items()}
            idx = torch.as_tensor(padded[present[i:i + fit]], device=device)
            outs.append(torch.cat([run(unit_models, x[idx[:, s:s + span]]) for s in range(0, longest, span)], 2))
        out = torch.cat(outs)  # [present units, K', longest, out]
        rank = np.zeros(units, np.int64)
        rank[present] = np.arange(len(present))
        result = out.new_empty((kk, len(rows), *out.shape[3:]))
        result[:, torch.as_tensor(order, device=device)] = out[
            torch.as_tensor(rank[group[order]], device=device), :, torch.as_tensor(slot, device=device)].transpose(0, 1)
        return result

    def _row_bytes_for(self, x: torch.Tensor) -> None:
        shape = tuple(x.shape[1:])
        if shape not in self._row_bytes:
            self._row_bytes[shape] = inference_row_bytes(self.module, shape, x[:1])


def _unit(models: Params, unit: int) -> Params:
    return {n: v[unit] for n, v in models.items()}
