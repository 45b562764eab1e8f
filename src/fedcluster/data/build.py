"""Build (or load from the on-disk cache) the federation a run config describes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from fedcluster.config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.data.normalize import standardize
from fedcluster.data.progress import build_progress
from fedcluster.errors import ConfigError
from fedcluster.registry import DATASETS, SCENARIOS

CACHE_VERSION = 2  # bump when a scenario changes what the same parameters build


def cache_dir() -> Path:
    return Path(os.environ.get("FEDCLUSTER_CACHE", Path.home() / ".cache" / "fedcluster")) / "federations"


def cache_key(cfg: RunConfig, params: Any) -> str:
    spec = {
        "v": CACHE_VERSION, "dataset": cfg.dataset, "data_dir": cfg.data_dir, "scenario": cfg.scenario,
        "params": dataclasses.asdict(params) if params is not None else {},
        "num_clients": cfg.num_clients, "seed": cfg.effective_data_seed(),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:20]


def cache_path(cfg: RunConfig, params: Any) -> Path:
    """Where the federation of ``cfg`` is (or will be) cached."""
    return cache_dir() / f"{cfg.dataset}-{cfg.scenario}-{cache_key(cfg, params)}.pt"


def build_federation(cfg: RunConfig, params: Any, use_cache: bool = True) -> Federation:
    """The federation of ``cfg`` (dataset, scenario, its params, num_clients, data seed), cached on disk;
    image inputs standardised when ``cfg.normalize`` (None: the dataset's default, ``DatasetSpec.standardize``;
    applied after the cache, which holds the raw inputs; synthetic data are never touched)."""
    fed = _raw_federation(cfg, params, use_cache)
    spec = DATASETS.get(cfg.dataset).obj
    wanted = spec.standardize if cfg.normalize is None else cfg.normalize
    if wanted and spec.load is not None:
        standardize(fed)
    return fed


def _raw_federation(cfg: RunConfig, params: Any, use_cache: bool) -> Federation:
    path = cache_path(cfg, params)
    if use_cache and path.is_file():
        return Federation.load(path)
    spec = DATASETS.get(cfg.dataset).obj
    scenario = SCENARIOS.get(cfg.scenario).obj
    rng = np.random.default_rng([cfg.effective_data_seed(), 0])
    if spec.synthetic_scenario is not None and cfg.scenario != spec.synthetic_scenario:
        raise ConfigError(f"dataset {cfg.dataset!r} is synthetic: use scenario={spec.synthetic_scenario}")
    data = spec.load(cfg.data_dir) if spec.load is not None else None
    try:
        with build_progress(cfg.progress):
            fed = scenario(data, cfg.num_clients, params, rng)
    except ValueError as e:
        raise ConfigError(f"scenario {cfg.scenario!r} on {cfg.dataset!r}: {e}") from None
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")  # unique per process: concurrent builds don't clash
            fed.save(tmp)
            tmp.replace(path)
        except OSError as e:
            print(f"fedcluster: warning: cannot cache the federation in {path.parent} ({e.strerror}); "
                  "set FEDCLUSTER_CACHE to a writable folder", file=sys.stderr)
    return fed
