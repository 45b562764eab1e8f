"""Before anything big is allocated: caps on knobs that cannot help, and a memory estimate that refuses early.

Two checks run in :class:`~fedcluster.engine.runner.Run`:

* :func:`check_federation_fits` before the federation is built, for scenarios whose params say how large
  their data will be (``estimated_bytes(num_clients)``; the synthetic ones). Data read from files is
  checked by the loaders against the file headers.
* :func:`fit_run` after it is built and before the model exists: ``batch_size`` is capped at the largest
  client's training set (a larger batch is the whole client anyway), ``workers`` at the cohort (more
  processes would sit idle), ``algorithm.num_clusters`` may not exceed the clients, and the memory of
  K × cohort training units, their minibatch schedules, activations and evaluation outputs
  (:func:`fedcluster.engine.memory.estimate_training`, the estimator that also sizes the trainer's chunks)
  is compared with the memory available: on an accelerator its free memory as the driver reports it
  (:func:`fedcluster.engine.memory.device_memory`; the federation is already there), on the CPU the host's
  (:func:`fedcluster.data.host_memory.available_bytes`).
"""

from __future__ import annotations

from typing import Any

from fedcluster.config.notes import note
from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.data.host_memory import available_bytes, format_bytes
from fedcluster.engine.memory import device_memory, estimate_training
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


def fit_run(cfg: RunConfig, typed: dict[str, Any], fed: Federation) -> None:
    """Apply the caps (with a note) and refuse a run whose training would not fit in memory."""
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
    device = device_memory(fed.train.device)
    if device is not None:
        est = estimate_training(cfg, typed, fed, k, cohort)
        if est is not None and est.total > device.free:
            raise ResourceError(f"training needs about {format_bytes(est.total)} of GPU memory but {device.name} "
                                f"has {format_bytes(device.free)} free of {format_bytes(device.total)} ({k} "
                                f"cluster(s) x {cohort} clients per round, batch_size={cfg.batch_size}); "
                                f"{est.device_knobs(cfg)}")
        return
    free = available_bytes()
    if free is None:
        return
    est = estimate_training(cfg, typed, fed, k, cohort)
    if est is not None and est.total > free:
        raise ResourceError(f"training needs about {format_bytes(est.total)} but only {format_bytes(free)} is "
                            f"available ({k} cluster(s) x {cohort} clients per round, batch_size={cfg.batch_size}); "
                            f"{est.largest_knobs()}")
