"""Build (or load from the on-disk cache) the federation a run config describes."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from fedcluster.catalog.registry import DATASETS, SCENARIOS
from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.data.fingerprint import data_location, fingerprint
from fedcluster.data.normalize import standardize
from fedcluster.data.progress import build_progress
from fedcluster.errors import ConfigError
from fedcluster.storage.atomic import StorageError, remove_stale_temporaries
from fedcluster.storage.state_file import StateFileError

CACHE_VERSION = 4  # bump when a scenario changes what the same parameters build (4: keyed by the data's files)


def cache_dir() -> Path:
    """The folder of cached federations: ``$FEDCLUSTER_CACHE/federations``, else under ``~/.cache/fedcluster``;
    a variable set to nothing (or blanks) is refused, not read as the current folder or silently dropped."""
    chosen = os.environ.get("FEDCLUSTER_CACHE")
    if chosen is not None and not chosen.strip():
        raise ConfigError(f"FEDCLUSTER_CACHE is set but empty ({chosen!r}): unset it (the cache then goes to "
                          "~/.cache/fedcluster) or name a folder, e.g. FEDCLUSTER_CACHE=$HOME/fedcluster-cache")
    return Path(chosen if chosen is not None else Path.home() / ".cache" / "fedcluster") / "federations"


def cache_key(cfg: RunConfig, params: Any) -> str:
    """The federation's cache key: every key that decides it, and for data read from files, the absolute folder
    and a fingerprint of the files under it (so a changed folder, or another folder under the same typed relative
    ``data_dir``, is read afresh)."""
    spec = {
        "v": CACHE_VERSION, "dataset": cfg.dataset, "data_dir": cfg.data_dir, "scenario": cfg.scenario,
        "params": dataclasses.asdict(params) if params is not None else {},
        "num_clients": cfg.num_clients, "seed": cfg.effective_data_seed(),
    }
    source = DATASETS.get(cfg.dataset).obj
    if source.load is not None and getattr(source, "reads_files", True):
        location = data_location(cfg.data_dir, getattr(source, "default_dir", None))
        spec.update(data_dir=str(location), files=fingerprint(location))
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:20]


def cache_path(cfg: RunConfig, params: Any, key: str | None = None) -> Path:
    """Where the federation of ``cfg`` is (or will be) cached (``key``: its :func:`cache_key`, if known)."""
    key = cache_key(cfg, params) if key is None else key
    return cache_dir() / f"{cfg.dataset}-{cfg.scenario}-{key}.safetensors"


def build_federation(cfg: RunConfig, params: Any, use_cache: bool = True) -> Federation:
    """The federation of ``cfg`` (dataset, scenario, its params, num_clients, data seed), cached on disk;
    image inputs standardised when ``cfg.normalize`` (None: the dataset's default, ``DatasetSpec.standardize``;
    applied after the cache, which holds the raw inputs; synthetic data are never touched)."""
    fed = _raw_federation(cfg, params, use_cache)
    spec = DATASETS.get(cfg.dataset).obj
    wanted = spec.standardize if cfg.normalize is None else cfg.normalize
    if wanted and spec.load is not None:
        standardize(fed)
    fed.built_from = built_from(cfg)  # type: ignore[attr-defined]  # what fedcluster.run checks a config against
    return fed


def built_from(cfg: RunConfig) -> dict[str, Any]:
    """The keys of ``cfg`` that decide its federation, as a run's config.yaml records them."""
    return {"dataset": cfg.dataset, "data_dir": cfg.data_dir, "scenario": cfg.scenario,
            "scenario_params": dict(cfg.scenario_params), "num_clients": cfg.num_clients,
            "data_seed": cfg.effective_data_seed(), "normalize": cfg.normalize}


def _raw_federation(cfg: RunConfig, params: Any, use_cache: bool) -> Federation:
    key = cache_key(cfg, params)
    path = cache_path(cfg, params, key)
    if use_cache and path.is_file():
        cached = _load_cached(path, key, cfg)
        if cached is not None:
            return cached
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
        _store(fed, path, key)
    return fed


def _load_cached(path: Path, key: str, cfg: RunConfig) -> Federation | None:
    """The cached federation, or None (after a warning, the bad file deleted) if it is not intact or not one of
    ``cfg``'s data set and scenario."""
    try:
        fed = Federation.load(path, key)
        try:
            spec = DATASETS.get(cfg.dataset).obj
            fed.check_fits(cfg.dataset, cfg.scenario, spec.load is not None, spec.classes)
        except ValueError as e:
            raise StateFileError(path, f"does not describe this run's federation ({e})") from None
        return fed
    except StateFileError as e:
        print(f"fedcluster: warning: cached federation {e}; discarding it and building it again",
              file=sys.stderr)
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return None


def _store(fed: Federation, path: Path, key: str) -> None:
    """Cache ``fed`` (atomically; unique temporary names, so concurrent builds don't clash)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path.parent)
        fed.save(path, key)
    except StorageError as e:  # the hint names FEDCLUSTER_CACHE
        print(f"fedcluster: warning: the federation is not cached: {e}; the run goes on", file=sys.stderr)
    except OSError as e:
        print(f"fedcluster: warning: the federation is not cached: cannot create {path.parent}: {e.strerror}; "
              "set FEDCLUSTER_CACHE to a writable folder; the run goes on", file=sys.stderr)
