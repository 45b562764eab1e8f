"""``engine=unit-loop``: units trained one after the other with dense convolutions, for models too large to gain
from vectorisation.

``vmap`` turns K × cohort per-unit convolutions into grouped convolutions, cuDNN's weak spot; for a small CNN the
batching still wins by far, but a model whose activations per sample are large (ResNet-18, MobileNet-V2) already
fills the GPU with one unit's batch, and grouped kernels then run slower than the plain ones. This path runs each
unit's steps with ordinary (dense) convolutions and the same functional SGD step as the vectorised path
(``torch.func.grad`` of the weighted loss, weight decay, proximal term, momentum), so the two agree to float
tolerance; every step computes only the unit's real rows.

On CUDA a step is captured once per batch width as a CUDA graph on static buffers (parameters, momentum, the
step's row indices and weights) and replayed for every step of every unit: one launch per step instead of
hundreds, which is what a unit's small batch is bound by. Graphs are spread over ``STREAMS`` streams, units
round-robin, so that several units' steps overlap on the GPU. A capture that fails falls back to eager steps.
On the CPU the steps run eagerly (the reference this path is tested against).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad

from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.precision import autocast
from fedcluster.engine.training.sgd import sgd_step

STREAMS = 4  # CUDA streams whose units' steps may overlap
MAX_GRAPHS = 8  # batch widths captured per stream; other widths run eagerly
LOOP_ACTIVATIONS = 2 * 2**20  # activation bytes per sample above which an accelerator trains units one by one


def prefers_loop(activation_bytes: int | None) -> bool:
    """Whether a model with this many activation bytes per sample (engine.memory.footprint) trains faster unit by
    unit with dense convolutions than vectorised (ResNet-18: ~7 MiB per 3×32×32 sample; the small CNNs < 0.5)."""
    return activation_bytes is not None and activation_bytes > LOOP_ACTIVATIONS


class _Lane:
    """One stream's static buffers and captured steps."""

    def __init__(self, stacked: Params, solver: Solver, x: torch.Tensor, width: int) -> None:
        params = {k: v[0] for k, v in stacked.items()}  # one unit's shapes
        self.p = {k: torch.empty_like(v) for k, v in params.items()}
        self.buf = {k: torch.zeros_like(v) for k, v in params.items()} if solver.momentum > 0 else None
        self.anchor = {k: torch.empty_like(v) for k, v in params.items()} if solver.prox_mu else None
        self.idx = torch.zeros(width, dtype=torch.long, device=x.device)
        self.w = torch.zeros(width, dtype=torch.float32, device=x.device)
        self.n = torch.ones((), dtype=torch.float32, device=x.device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.stream = torch.cuda.Stream(x.device) if x.device.type == "cuda" else None
        # the lane's graphs run one after the other: they share one memory pool for their temporaries
        self.pool = torch.cuda.graph_pool_handle() if x.device.type == "cuda" else None
        self.failed = False  # a capture failed: this lane runs eager steps


def train_looped(module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch, solver: Solver,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], precision: str = "fp32",
                 graphs: bool | None = None) -> Params:
    """Train every unit of ``batch`` (engine.training.kernels.Batch) one by one; returns the stack [U, ...].
    ``graphs`` (default: on CUDA) captures and replays each step as a CUDA graph."""
    graphs = x.device.type == "cuda" if graphs is None else graphs
    if batch.weight.dim() != 3:
        raise ValueError("engine=unit-loop trains one weight per sample; use engine=vectorized for per-head weights")
    real = batch.real_counts()
    out = batch.empty_out()
    width = int(batch.global_index.shape[2])
    lanes = [_Lane(batch.init, solver, x, width) for _ in range(STREAMS if graphs else 1)]
    names = list(out)

    def unit_loss(p: Params, xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor, nb: torch.Tensor):
        with (autocast(x.device, precision) if not graphs or precision == "fp32" else
              torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, cache_enabled=False)):
            o = functional_call(module, p, (xb,))
        return (loss_fn(o, yb) * wb).sum() / nb

    grad_fn = grad(unit_loss)

    def step(lane: _Lane, rows: int) -> None:
        """One SGD step of the lane's unit on its first ``rows`` staged rows (the vectorised path's maths)."""
        idx = lane.idx[:rows]
        g = grad_fn(lane.p, x[idx], y[idx], lane.w[:rows], lane.n)
        sgd_step([lane.p[k] for k in names], [g[k] for k in names], solver,
                 None if lane.buf is None else [lane.buf[k] for k in names],
                 None if lane.anchor is None else [lane.anchor[k] for k in names])

    def replay(lane: _Lane, rows: int) -> None:
        graph = lane.graphs.get(rows)
        if graph is not None:
            graph.replay()
        elif len(lane.graphs) < MAX_GRAPHS and not lane.failed:
            captured = _capture(lambda: step(lane, rows), lane)  # runs this step, then records it
            if captured is None:
                lane.failed = True
            else:
                lane.graphs[rows] = captured
        else:
            step(lane, rows)

    with torch.no_grad():
        for lane in lanes:  # the batch was staged on the current stream
            if lane.stream is not None:
                lane.stream.wait_stream(torch.cuda.current_stream(x.device))
        for u in range(len(batch.steps)):
            lane = lanes[u % len(lanes)]
            with torch.cuda.stream(lane.stream) if lane.stream is not None else contextlib.nullcontext():
                row = batch.start_of(u)
                for k in names:
                    lane.p[k].copy_(batch.init[k][row])
                    if lane.anchor is not None:
                        lane.anchor[k].copy_(batch.init[k][row] if batch.anchor is None else batch.anchor[k][u])
                    if lane.buf is not None:
                        if batch.momentum is not None:
                            lane.buf[k].copy_(batch.momentum[k][u])
                        else:
                            lane.buf[k].zero_()
                for s in range(int(batch.steps[u])):
                    rows = int(real[u, s])
                    lane.idx[:rows].copy_(batch.global_index[u, s, :rows])
                    lane.w[:rows].copy_(batch.weight[u, s, :rows])
                    lane.n.copy_(batch.count[u, s])
                    (replay if graphs else step)(lane, rows)
                for k in names:
                    out[k][u].copy_(lane.p[k])
                    if batch.momentum is not None and lane.buf is not None:
                        batch.momentum[k][u].copy_(lane.buf[k])
        for lane in lanes:  # the results are read on the current stream
            if lane.stream is not None:
                torch.cuda.current_stream(x.device).wait_stream(lane.stream)
    return out


def _capture(fn: Callable[[], None], lane: _Lane) -> torch.cuda.CUDAGraph | None:
    """Run ``fn`` (the step at hand) on the lane's stream, then capture it as a CUDA graph for the next steps of
    that width (a capture records kernels without running them, so the state moves by one step only); None if
    the capture fails (the caller then runs eager steps)."""
    fn()  # the real step, also the warm-up: allocations and cuDNN autotuning happen outside the capture
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=lane.pool, stream=lane.stream):
            fn()
        return graph
    except RuntimeError:
        return None
