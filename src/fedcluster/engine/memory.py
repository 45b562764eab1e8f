"""How many bytes training takes, and the one memory plan that sizes the vectorised chunks and refuses a run.

A *unit* (one model trained on one client's data) needs, while it trains in a vectorised call, its parameters
a few times over (the stacked parameters, their gradients, the momentum buffer and the proximal anchor, plus
the step's temporaries) and the activations of one batch kept for the backward pass
(:meth:`UnitFootprint.step_bytes`), plus its inputs. :func:`footprint` counts the parameters and measures the
activations with one forward pass of a single sample on PyTorch's ``meta`` device, hooks summing the leaf modules'
outputs (shapes only: nothing is allocated or computed; a model that cannot run on ``meta`` is measured on a real
sample when one is given).

One figure of free memory (:func:`device_memory`, :attr:`DeviceMemory.available`): what the driver reports free
plus what this process's caching allocator holds unused (freed tensors of earlier phases, reusable without the
driver, which counts them as taken). One plan (:class:`MemoryPlan`): the state held for the whole round is counted
first (the K models and, for a method that streams its aggregation, the K sums it folds into; for the others each
unit's trained result and start; kept momentum; minibatch schedules; evaluation outputs), and the vectorised chunk
is sized from what is left. A run is refused only when a single unit cannot fit beside the held state.

Several runs sharing one accelerator (``fedcluster reproduce --workers N --device cuda``) each plan with their share:
the caller reads the free memory once, splits it (:func:`worker_share`) and gives every worker process its share in
``FEDCLUSTER_DEVICE_MEMORY_MB``; :func:`device_memory` then counts at most that share, less what the process has
allocated, as available, so that N workers never over-commit the card.

Users: :meth:`fedcluster.engine.trainers.local.LocalTrainer.chunk_size` (units per vectorised call, at training time),
:func:`estimate_training` + :func:`fedcluster.engine.budget.fit_run` (the early refusal), and the inference row
budget (:func:`free_bytes`).
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.data.host_memory import format_bytes
from fedcluster.errors import UserError
from fedcluster.models.base import build_model

PARAM_COPIES = 5  # while training: parameters, gradients, momentum, anchor, update temporaries
ACTIVATION_COPIES = 3  # saved activations, their gradients, vmap's temporaries
HELD_COPIES = 2  # each unit's trained result and (unless shared) its starting point, while they are held
FREE_SHARE = 0.6  # of the memory left for vectorised calls, leaving room for the allocator's fragmentation
SHARE_VARIABLE = "FEDCLUSTER_DEVICE_MEMORY_MB"  # this process's share of the accelerator (runs sharing one device)
CONTEXT_BYTES = 1 << 30  # what each process's CUDA context and kernels take outside the allocator (about)
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
    its input; the sizing rule of ``engine.evaluation.inference``'s rows per call."""
    fp = footprint(module, input_shape, sample)
    activations = UNMEASURED_ROW if fp is None else INFERENCE_COPIES * fp.activations
    return activations + math.prod(input_shape) * 4


@dataclass(frozen=True)
class DeviceMemory:
    """An accelerator's memory: what its driver reports free, its total, and what this process's caching
    allocator holds unused (reserved − allocated: taken for the driver, free for this process)."""

    name: str
    free: int
    total: int
    cached: int = 0
    share: int | None = None  # this process's share of the device (several runs share it), None: no share set
    allocated: int = 0  # what this process's allocator has handed out

    @property
    def available(self) -> int:
        """The memory this process can still use: the driver's free memory plus the allocator's unused cache, and
        with a share at most what the share leaves beside this process's allocations."""
        own = self.free + max(self.cached, 0)
        return own if self.share is None else max(0, min(own, self.share - self.allocated))

    def describe(self) -> str:
        """E.g. "NVIDIA H100 80GB HBM3 has 60.3 GiB free of 79.2 GiB (25.3 GiB free on the device, 35.0 GiB held
        unused by this process)"."""
        line = f"{self.name} has {format_bytes(self.available)} free of {format_bytes(self.total)}"
        if self.cached > 0:
            line += (f" ({format_bytes(self.free)} free on the device, {format_bytes(self.cached)} held unused "
                     "by this process)")
        if self.share is not None:
            line += (f" for this run, whose share of the device is {format_bytes(self.share)} (runs share it: fewer "
                     "--workers give each more)")
        return line


def device_memory(device: torch.device) -> DeviceMemory | None:
    """The memory of an accelerator (the one reading every memory decision uses); None on the CPU."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        allocated = torch.cuda.memory_allocated(device)
        cached = torch.cuda.memory_reserved(device) - allocated
        return DeviceMemory(torch.cuda.get_device_name(device), int(free), int(total), int(max(cached, 0)),
                            memory_share(), int(allocated))
    return None


def memory_share() -> int | None:
    """This process's share of its accelerator in bytes (``FEDCLUSTER_DEVICE_MEMORY_MB``), None when unset (then the
    process plans with all it finds); anything but a positive number of MiB is refused in one line."""
    text = os.environ.get(SHARE_VARIABLE)
    if text is None:
        return None
    try:
        mib = float(text)
    except ValueError:
        mib = math.nan
    if not (math.isfinite(mib) and 0 < mib <= 2**50):
        raise UserError(f"{SHARE_VARIABLE}={text[:40]!r}: give this process's share of the accelerator as a positive "
                        "number of MiB, or unset it to plan with all the free memory")
    return int(mib * 2**20)


def worker_share(memory: DeviceMemory, workers: int) -> int:
    """Each of ``workers`` processes' share of a device whose memory reads ``memory`` (read once, before they
    start): what is available less each one's CUDA context, split evenly."""
    return max(0, (memory.available - workers * CONTEXT_BYTES) // max(workers, 1))


def free_bytes(device: torch.device) -> int | None:
    """A share (``FREE_SHARE``) of the memory an accelerator can still give (:attr:`DeviceMemory.available`);
    None on the CPU."""
    mem = device_memory(device)
    return None if mem is None else int(mem.available * FREE_SHARE)


def budget_bytes(device: torch.device, chunk_mb: float | None) -> int | None:
    """The memory budget of one vectorised call without a plan: ``chunk_mb`` MiB when given, else a share of the
    available accelerator memory; None on the CPU without ``chunk_mb`` (the caller keeps its ``max_units``)."""
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


@dataclass(frozen=True)
class MemoryPlan:
    """Held state first, the vectorised chunk from what is left: ``held`` bytes stay allocated for the whole round,
    each unit of a vectorised call adds ``unit`` bytes, ``units`` units train per round. Units per call: a share
    (``FREE_SHARE``) of the room left after the held state, over the per-unit bytes, balanced over the calls."""

    available: int
    held: int
    unit: int
    units: int

    @property
    def room(self) -> int:
        """Bytes left for the vectorised calls."""
        return self.available - self.held

    @property
    def fits(self) -> bool:
        """Whether one unit fits beside the held state (else nothing can train)."""
        return self.room >= self.unit

    @property
    def fit(self) -> int:
        """The most units one call may take (at least one)."""
        return max(1, min(max(self.units, 1), int(self.room * FREE_SHARE) // max(self.unit, 1)))

    @property
    def chunk(self) -> int:
        """Units per call, balanced over the calls a round takes."""
        return balanced_chunk(self.units, self.fit)

    @property
    def peak(self) -> int:
        """Bytes at the largest moment: the held state and one call."""
        return self.held + self.chunk * self.unit


def unit_bytes(fp: UnitFootprint, batch_size: int, sample_bytes: int, streamed: bool) -> int:
    """Bytes one unit adds to a vectorised call: its step (``step_bytes``), its batch of inputs and, when the
    results are folded into the aggregation call by call (``streamed``), its result and start."""
    return fp.step_bytes(batch_size) + batch_size * sample_bytes + (HELD_COPIES * fp.params if streamed else 0)


@dataclass(frozen=True)
class Estimate:
    """Bytes a run's training will allocate, by part; each part names the knobs that size it. Held for the whole
    round: ``models`` (the K models, and the K sums of a streamed aggregation), ``units`` (every unit's result
    and start for a method that keeps them, kept momentum buffers), ``schedules`` and ``evaluation``; each unit of a
    vectorised call adds ``unit`` bytes, ``count`` units train per round."""

    models: int
    units: int
    schedules: int
    evaluation: int
    unit: int
    count: int
    unit_params: int = 0  # the parameter copies in ``unit``

    @property
    def held(self) -> int:
        return self.models + self.units + self.schedules + self.evaluation

    def plan(self, available: int) -> MemoryPlan:
        return MemoryPlan(available, self.held, self.unit, self.count)

    @property
    def total(self) -> int:
        """The held state plus the units trained at once without a memory budget (``MAX_UNITS``: the CPU)."""
        return self.held + min(self.count, MAX_UNITS) * self.unit

    def device_knobs(self, cfg: RunConfig) -> str:
        """The keys that lower the largest part on an accelerator, with their current values."""
        knobs = {
            "units": f"train fewer clients per round with clients_per_round= (now {cfg.clients_per_round:g}) or "
                     "fewer clusters with algorithm.num_clusters=",
            "schedules": f"train fewer clients per round with clients_per_round= (now {cfg.clients_per_round:g})",
            "unit": f"lower batch_size= (now {cfg.batch_size}) or the model size (model.*)",
            "evaluation": "fewer clusters with algorithm.num_clusters=, or fewer clients with num_clients=",
            "models": "fewer clusters with algorithm.num_clusters= or a smaller model (model.*)",
        }
        part = max(knobs, key=lambda k: getattr(self, k))
        name = "one training unit" if part == "unit" else part
        return f"{name} take{'s' if part == 'unit' else ''} most of it: {knobs[part]}"

    def largest_knobs(self) -> str:
        knobs = {
            "units": "clients_per_round, algorithm.num_clusters or the model size (model.*)",
            "schedules": "clients_per_round or local_epochs",
            "unit": "clients_per_round, algorithm.num_clusters, batch_size or the model size (model.*)",
            "evaluation": "algorithm.num_clusters or the model size (model.*)",
            "models": "algorithm.num_clusters or the model size (model.*)",
        }
        sizes = {**{k: getattr(self, k) for k in knobs if k != "unit"}, "unit": min(self.count, MAX_UNITS) * self.unit}
        part = max(knobs, key=lambda k: sizes[k])
        return f"{'training units' if part == 'unit' else part} take most of it: lower {knobs[part]}"


def model_footprint(cfg: RunConfig, typed: dict[str, Any], fed: Federation) -> UnitFootprint | None:
    """The run's model's :class:`UnitFootprint`, from a parameter-free copy built on the ``meta`` device."""
    try:
        with torch.device("meta"):
            model = build_model(cfg.model, fed.input_shape, fed.output_dim, typed["model"])
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return None
    return footprint(model, tuple(fed.input_shape))


def estimate_training(cfg: RunConfig, typed: dict[str, Any], fed: Federation, k: int, cohort: int,
                      streamed: bool = False) -> Estimate | None:
    """The :class:`Estimate` of a run training ``k`` × ``cohort`` units per round on the federation's device, or
    None when the model cannot be measured. ``streamed``: the method folds each call's results into its K weighted
    sums as the call finishes (no per-unit result is held for the round)."""
    fp = model_footprint(cfg, typed, fed)
    if fp is None:
        return None
    units = k * cohort
    largest = int(fed.train.sizes.max(initial=1))
    steps = math.ceil(largest / cfg.batch_size) * cfg.local_epochs
    sample_bytes = math.prod(fed.input_shape) * 4
    momentum = fed.num_clients * k * fp.params if cfg.client_momentum == "keep" else 0  # one buffer per pair, kept
    return Estimate(
        models=(2 * k if streamed else k) * fp.params,
        units=(0 if streamed else units * HELD_COPIES * fp.params) + momentum,
        schedules=units * steps * cfg.batch_size * 24,  # local + global index (int64 each), mask + weight (float32)
        evaluation=2 * k * max(fed.val.num_samples, fed.test.num_samples) * max(fed.output_dim, 1) * 4,
        unit=unit_bytes(fp, cfg.batch_size, sample_bytes, streamed),
        count=units,
        unit_params=(PARAM_COPIES + (HELD_COPIES if streamed else 0)) * fp.params,
    )
