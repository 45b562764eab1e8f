"""Before anything big is allocated: caps on knobs that cannot help, and a memory estimate that refuses early.

Two checks run in :class:`~fedcluster.engine.runner.Run`:

* :func:`check_federation_fits` before the federation is built, for scenarios whose params say how large
  their data will be (``estimated_bytes(num_clients)``; the synthetic ones). Data read from files is
  checked by the loaders against the file headers.
* :func:`fit_run` after it is built and before the model exists: ``batch_size`` is capped at the largest
  client's training set (a larger batch is the whole client anyway), ``workers`` at the cohort (more
  processes would sit idle), ``algorithm.num_clusters`` may not exceed the clients, and the memory of
  K × cohort training units is planned (:func:`fedcluster.engine.memory.estimate_training`, the estimator whose
  per-unit bytes also size the trainer's chunks): on an accelerator the held state (models, per-unit state,
  schedules, evaluation outputs) is counted first against the memory available
  (:attr:`fedcluster.engine.memory.DeviceMemory.available`: free plus what this process's allocator holds unused;
  the federation is already there) and the run is refused only when a single unit cannot fit beside it (smaller
  vectorised calls fit what one large one would not); on the CPU the held state and the units trained at once are
  compared with the host's memory (:func:`fedcluster.data.host_memory.available_bytes`).
"""

from __future__ import annotations

from typing import Any

from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.notes import note
from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.data.host_memory import available_bytes, format_bytes
from fedcluster.engine import memory
from fedcluster.engine.memory import MAX_UNITS, Estimate, estimate_training
from fedcluster.errors import ConfigError, ResourceError


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


def _cpu_need(cfg: RunConfig, est: Estimate) -> int:
    """Bytes of CPU training: the held state and the units of one vectorised call (``MAX_UNITS``, or what a given
    ``chunk_mb`` holds)."""
    if cfg.chunk_mb is None:
        return est.total
    return est.held + max(1, min(est.count, int(cfg.chunk_mb * 2**20) // max(est.unit, 1))) * est.unit


def streams_aggregation(cfg: RunConfig, typed: dict[str, Any]) -> bool:
    """Whether the run's method folds each vectorised call's results into its K sums as the call finishes."""
    if cfg.algorithm not in ALGORITHMS:
        return False
    rule = getattr(ALGORITHMS.get(cfg.algorithm).obj, "streams_aggregation", None)  # presets are functions
    return bool(rule(typed["algorithm"])) if rule is not None else False


def fit_run(cfg: RunConfig, typed: dict[str, Any], fed: Federation, streamed: bool | None = None) -> None:
    """Apply the caps (with a note) and refuse a run whose training would not fit in memory (``streamed``: whether
    the method streams its aggregation; by default what its registered class says)."""
    sizes = fed.train.sizes
    largest = int(sizes.max(initial=1))
    cohort = cfg.cohort_size()
    if cfg.batch_size > largest and cfg.drop_last:
        raise ConfigError(f"drop_last=true with batch_size={cfg.batch_size} drops every batch: the largest client "
                          f"has {largest} training samples, so no client would train; use batch_size={largest} or "
                          "less, or drop_last=false")
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
    if streamed is None:
        streamed = streams_aggregation(cfg, typed)
    device = memory.device_memory(fed.train.device)
    if device is not None:
        est = estimate_training(cfg, typed, fed, k, cohort, streamed)
        if est is not None and not (plan := est.plan(device.available)).fits:
            raise ResourceError(f"training needs at least {format_bytes(plan.held + plan.unit)} of GPU memory "
                                f"({format_bytes(plan.held)} held for the round and one training unit of "
                                f"{format_bytes(plan.unit)}) but {device.describe()} ({k} cluster(s) x {cohort} "
                                f"clients per round, batch_size={cfg.batch_size}); {est.device_knobs(cfg)}")
        return
    free = available_bytes()
    if free is None:
        return
    est = estimate_training(cfg, typed, fed, k, cohort, streamed)
    if est is None:
        return
    need = _cpu_need(cfg, est)
    if need <= free:
        return
    plan = est.plan(free)
    if cfg.chunk_mb is None and plan.fits:  # smaller vectorised calls fit what MAX_UNITS units at once would not
        cfg.chunk_mb = max(1, (plan.fit * est.unit) >> 20)
        note(f"training {min(est.count, MAX_UNITS)} units at once needs about {format_bytes(need)} but "
             f"{format_bytes(free)} is available; training at most {plan.fit} units per vectorised call "
             f"(chunk_mb={cfg.chunk_mb})")
        return
    raise ResourceError(f"training needs about {format_bytes(need)} but only {format_bytes(free)} is "
                        f"available ({k} cluster(s) x {cohort} clients per round, batch_size={cfg.batch_size}); "
                        f"{est.largest_knobs()}")
