"""Before anything big is allocated: caps on knobs that cannot help, and a memory estimate that refuses early.

Two checks run in :class:`~fedcluster.engine.runner.Run`:

* :func:`check_federation_fits` before the federation is built, for scenarios whose params say how large
  their data will be (``estimated_bytes(num_clients)``; the synthetic ones). Data read from files is
  checked by the loaders against the file headers.
* :func:`fit_run` after it is built and before the model exists: ``batch_size`` is capped at the largest
  client's training set (a larger batch is the whole client anyway), ``workers`` at the cohort (more
  processes would sit idle), ``algorithm.num_clusters`` may not exceed the clients, and the memory of
  K × cohort training units, their minibatch schedules, activations and evaluation outputs is estimated
  from a parameter-free copy of the model (PyTorch's ``meta`` device) and compared with the memory
  available (:func:`fedcluster.memory.available_bytes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from fedcluster.config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.errors import ConfigError, ResourceError
from fedcluster.memory import available_bytes, format_bytes
from fedcluster.models.base import build_model
from fedcluster.validation import note

UNIT_COPIES = 3  # per training unit: initial, trained and gradient stacks (+1 for momentum buffers)
ACTIVATION_COPIES = 2  # forward outputs kept for backward and their gradients
MAX_CONCURRENT_UNITS = 256  # the vectorised path trains at most this many units at once (Trainer.max_units)


def check_federation_fits(cfg: RunConfig, scenario_params: Any) -> None:
    """Refuse a synthetic federation that would not fit, before generating it."""
    estimate = getattr(scenario_params, "estimated_bytes", None)
    free = available_bytes()
    if estimate is None or free is None:
        return
    need = int(estimate(cfg.num_clients))
    if need > free:
        raise ResourceError(f"the {cfg.scenario} federation needs about {format_bytes(need)} but only "
                            f"{format_bytes(free)} is available; make it smaller with "
                            f"{getattr(scenario_params, 'size_knobs', 'num_clients or the scenario.* sizes')}")


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

    def largest_knobs(self) -> str:
        knobs = {
            "units": "clients_per_round, algorithm.num_clusters or the model size (model.*)",
            "schedules": "clients_per_round or local_epochs",
            "activations": "batch_size or the model size (model.*)",
            "evaluation": "algorithm.num_clusters or the model size (model.*)",
        }
        part = max(knobs, key=lambda k: getattr(self, k))
        return f"{part} take most of it: lower {knobs[part]}"


def fit_run(cfg: RunConfig, typed: dict[str, Any], fed: Federation) -> None:
    """Apply the caps (with a note) and refuse a run whose training would not fit in memory."""
    sizes = fed.train.sizes
    largest = int(sizes.max(initial=1))
    cohort = cfg.cohort_size()
    if cfg.batch_size > largest:
        note(f"batch_size={cfg.batch_size} is larger than the largest client ({largest} training samples); "
             f"using batch_size={largest} (the same full-client batches)")
        cfg.batch_size = max(1, largest)
    if cfg.workers > cohort:
        note(f"workers={cfg.workers} is more than the {cohort} clients trained per round; using workers={cohort}")
        cfg.workers = cohort
    k = int(cfg.algorithm_params.get("num_clusters", 1) or 1)
    if k > fed.num_clients:
        raise ConfigError(f"algorithm.num_clusters={k} is more than the {fed.num_clients} clients; "
                          f"use at most num_clusters={fed.num_clients} (or more clients with num_clients=)")
    free = available_bytes()
    if free is None:
        return
    est = estimate_training(cfg, typed, fed, k, cohort)
    if est is not None and est.total > free:
        raise ResourceError(f"training needs about {format_bytes(est.total)} but only {format_bytes(free)} is "
                            f"available ({k} cluster(s) x {cohort} clients per round, batch_size={cfg.batch_size}); "
                            f"{est.largest_knobs()}")


def estimate_training(cfg: RunConfig, typed: dict[str, Any], fed: Federation, k: int, cohort: int) -> Estimate | None:
    """The :class:`Estimate` of a run, or None when the model cannot be built on the meta device."""
    counted = _meta_model_counts(cfg, typed, fed)
    if counted is None:
        return None
    params, activations_per_sample = counted
    units = k * cohort
    concurrent = min(units, MAX_CONCURRENT_UNITS)
    largest = int(fed.train.sizes.max(initial=1))
    steps = math.ceil(largest / cfg.batch_size) * cfg.local_epochs
    sample_bytes = math.prod(fed.input_shape) * 4
    schedule_slots = units * steps * cfg.batch_size
    return Estimate(
        units=(units * (UNIT_COPIES + (cfg.momentum > 0)) + k) * params * 4,
        schedules=schedule_slots * 24,  # local + global index (int64 each), mask + weight (float32 each)
        activations=concurrent * cfg.batch_size * (activations_per_sample * 4 * ACTIVATION_COPIES + sample_bytes),
        evaluation=2 * k * max(len(fed.val.x), len(fed.test.x)) * max(fed.output_dim, 1) * 4,
    )


def _meta_model_counts(cfg: RunConfig, typed: dict[str, Any], fed: Federation) -> tuple[int, int] | None:
    """(parameters, activation floats per sample) of the model, without allocating it."""
    outputs: list[int] = []

    def hook(_m: nn.Module, _inp: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor):
            outputs.append(out[0].numel() if out.dim() else 1)

    try:
        with torch.device("meta"):
            model = build_model(cfg.model, fed.input_shape, fed.output_dim, typed["model"])
            handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
            model.eval()  # batch-norm layers refuse a batch of one in training mode
            model(torch.empty((1, *fed.input_shape)))
            for h in handles:
                h.remove()
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return None
    return sum(p.numel() for p in model.parameters()), sum(outputs)
