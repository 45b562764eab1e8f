"""How many bytes training takes: the one estimator behind the vectorised chunk sizes and the early refusal.

A *unit* (one model trained on one client's data) needs, while it trains in a vectorised call, its parameters
a few times over (the stacked parameters, their gradients, the momentum buffer and the proximal anchor, plus
the step's temporaries) and the activations of one batch kept for the backward pass
(:meth:`UnitFootprint.step_bytes`); its trained result and its starting point (a copy, unless the caller shares
K starts through ``init_index``: counted anyway, an upper bound) are held for the whole call.
:func:`footprint` counts the parameters and measures the activations with one forward pass of a single
sample on PyTorch's ``meta`` device, hooks summing the leaf modules' outputs (shapes only: nothing is
allocated or computed; a model that cannot run on ``meta`` is measured on a real sample when one is given).

Two users:

* :func:`chunk_units` — units per vectorised call (``Trainer.chunk_size``): a memory budget
  (:func:`budget_bytes`: ``chunk_mb``, or a share of the free accelerator memory; none on the CPU, where the
  trainer keeps ``max_units``) over :meth:`UnitFootprint.step_bytes`;
* :func:`estimate_training` — a run's training memory by part (``engine.budget`` refuses a run whose total
  exceeds the memory available), with the same per-unit footprint and the same chunk rule.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.models.base import build_model

PARAM_COPIES = 5  # while training: parameters, gradients, momentum, anchor, update temporaries
ACTIVATION_COPIES = 3  # saved activations, their gradients, vmap's temporaries
HELD_COPIES = 2  # for the whole call: each unit's trained result and (unless shared) its starting point
FREE_SHARE = 0.6  # of free accelerator memory, leaving room for the allocator and the evaluation
MAX_UNITS = 256  # units per vectorised call without a budget (Trainer.max_units; the CPU default)


@dataclass(frozen=True)
class UnitFootprint:
    """The bytes of one training unit of a model: one copy of its parameters, and one copy of the activations
    (leaf-module outputs) of one sample."""

    params: int
    activations: int

    def step_bytes(self, batch_size: int) -> int:
        """Bytes one unit needs during a vectorised training step with ``batch_size`` samples."""
        return PARAM_COPIES * self.params + ACTIVATION_COPIES * self.activations * batch_size


def footprint(module: nn.Module, input_shape: tuple[int, ...], sample: torch.Tensor | None = None
              ) -> UnitFootprint | None:
    """The :class:`UnitFootprint` of ``module`` for inputs of ``input_shape`` (without the batch dimension),
    measured on the ``meta`` device; if the model cannot run there, on ``sample`` (one real input of shape
    [1, *input_shape]) when given, else None. The module is left as it was."""
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    total = 0

    def count(_m: nn.Module, _inp: object, out: object) -> None:
        nonlocal total
        if isinstance(out, torch.Tensor):
            total += out.numel() * out.element_size()

    modes = [(m, m.training) for m in module.modules()]
    hooks = [m.register_forward_hook(count) for m in module.modules() if next(m.children(), None) is None]
    module.eval()  # batch-norm layers refuse a batch of one in training mode; the shapes are the same
    try:
        state = {n: torch.empty_like(t, device="meta")
                 for n, t in itertools.chain(module.named_parameters(), module.named_buffers())}
        with torch.no_grad():
            functional_call(module, state, (torch.empty((1, *input_shape), device="meta"),))
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        if sample is None:
            return None
        total = 0
        with torch.no_grad():
            module(sample[:1].to(dtype=torch.float32))
    finally:
        for h in hooks:
            h.remove()
        for m, mode in modes:
            m.train(mode)
    return UnitFootprint(params, total)


INFERENCE_COPIES = 2  # a no-grad forward: each leaf output, plus vmap's layout copies of it
UNMEASURED_ROW = 2**20  # bytes per row assumed for a model that cannot be measured


def inference_row_bytes(module: nn.Module, input_shape: tuple[int, ...], sample: torch.Tensor | None = None) -> int:
    """Bytes one input row costs one model in a vectorised no-grad forward: ``INFERENCE_COPIES`` times its
    activations (every leaf module's output: an upper bound, since a no-grad pass frees them as it goes) plus
    its input; the sizing rule of ``engine.inference``'s rows per call."""
    fp = footprint(module, input_shape, sample)
    activations = UNMEASURED_ROW if fp is None else INFERENCE_COPIES * fp.activations
    return activations + math.prod(input_shape) * 4


def free_bytes(device: torch.device) -> int | None:
    """A share (``FREE_SHARE``) of the memory an accelerator can still give: what the driver reports free plus
    what PyTorch's caching allocator holds unused (freed tensors of earlier phases, reusable without the
    driver; the driver counts them as taken); None on the CPU."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int((free + max(cached, 0)) * FREE_SHARE)
    return None


@dataclass(frozen=True)
class DeviceMemory:
    """An accelerator's memory as its driver reports it."""

    name: str
    free: int
    total: int


def device_memory(device: torch.device) -> DeviceMemory | None:
    """The free and total memory of an accelerator (what the run's training must fit); None on the CPU."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return DeviceMemory(torch.cuda.get_device_name(device), int(free), int(total))
    return None


def budget_bytes(device: torch.device, chunk_mb: float | None) -> int | None:
    """The memory budget of one vectorised call: ``chunk_mb`` MiB when given, else the free accelerator
    memory; None on the CPU without ``chunk_mb`` (no budget: the caller keeps its ``max_units``)."""
    return free_bytes(device) if chunk_mb is None else int(chunk_mb * 2**20)


def chunk_units(budget: int, step_bytes: int) -> int:
    """Units per vectorised call: ``budget`` over the per-unit bytes, at least one."""
    return max(1, budget // max(step_bytes, 1))


def balanced_chunk(units: int, fit: int) -> int:
    """Units per call when ``units`` go in calls of at most ``fit``: as many calls as needed, all of (nearly)
    the same size (100 units that fit 45 at a time: 34 + 33 + 33, not 45 + 45 + 10, whose last call would
    leave most of the device idle)."""
    if units <= fit:
        return max(units, 1)
    return math.ceil(units / math.ceil(units / fit))


@dataclass
class Estimate:
    """Bytes a run's training will allocate, by part; each part names the knobs that size it."""

    units: int
    schedules: int
    activations: int
    evaluation: int

    @property
    def total(self) -> int:
        return self.units + self.schedules + self.activations + self.evaluation

    def device_knobs(self, cfg: RunConfig) -> str:
        """The keys that lower the largest part on an accelerator, with their current values."""
        chunk = f"now {cfg.chunk_mb:g}" if cfg.chunk_mb is not None else "now a share of the free memory"
        knobs = {
            "units": f"train fewer clients per round with clients_per_round= (now {cfg.clients_per_round:g}) or "
                     "fewer clusters with algorithm.num_clusters=",
            "schedules": f"train fewer clients per round with clients_per_round= (now {cfg.clients_per_round:g})",
            "activations": f"lower chunk_mb= (MiB one vectorised call may use, {chunk}) or batch_size= "
                           f"(now {cfg.batch_size})",
            "evaluation": "fewer clusters with algorithm.num_clusters=, or fewer clients with num_clients=",
        }
        part = max(knobs, key=lambda k: getattr(self, k))
        return f"{part} take most of it: {knobs[part]}"

    def largest_knobs(self) -> str:
        knobs = {
            "units": "clients_per_round, algorithm.num_clusters or the model size (model.*)",
            "schedules": "clients_per_round or local_epochs",
            "activations": "batch_size or the model size (model.*)",
            "evaluation": "algorithm.num_clusters or the model size (model.*)",
        }
        part = max(knobs, key=lambda k: getattr(self, k))
        return f"{part} take most of it: lower {knobs[part]}"


def model_footprint(cfg: RunConfig, typed: dict[str, Any], fed: Federation) -> UnitFootprint | None:
    """The run's model's :class:`UnitFootprint`, from a parameter-free copy built on the ``meta`` device."""
    try:
        with torch.device("meta"):
            model = build_model(cfg.model, fed.input_shape, fed.output_dim, typed["model"])
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return None
    return footprint(model, tuple(fed.input_shape))


def estimate_training(cfg: RunConfig, typed: dict[str, Any], fed: Federation, k: int, cohort: int) -> Estimate | None:
    """The :class:`Estimate` of a run training ``k`` × ``cohort`` units per round on the federation's device,
    or None when the model cannot be measured. Held for all units: their starting points and results, plus the
    K models; for the units of one vectorised call (the trainer's chunk rule): their step bytes and inputs."""
    fp = model_footprint(cfg, typed, fed)
    if fp is None:
        return None
    units = k * cohort
    budget = budget_bytes(fed.train.device, cfg.chunk_mb)
    concurrent = min(units, MAX_UNITS if budget is None else chunk_units(budget, fp.step_bytes(cfg.batch_size)))
    largest = int(fed.train.sizes.max(initial=1))
    steps = math.ceil(largest / cfg.batch_size) * cfg.local_epochs
    sample_bytes = math.prod(fed.input_shape) * 4
    return Estimate(
        units=(units * HELD_COPIES + k) * fp.params + concurrent * PARAM_COPIES * fp.params,
        schedules=units * steps * cfg.batch_size * 24,  # local + global index (int64 each), mask + weight (float32)
        activations=concurrent * cfg.batch_size * (ACTIVATION_COPIES * fp.activations + sample_bytes),
        evaluation=2 * k * max(fed.val.num_samples, fed.test.num_samples) * max(fed.output_dim, 1) * 4,
    )
