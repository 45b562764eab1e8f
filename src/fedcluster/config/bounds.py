"""Upper bounds on every size-like key: a run, a model or a data set asked to be larger is refused in one line
before anything is allocated. The bounds are far above any published setting (the configuration reference lists
them); a typo of a few extra digits would otherwise ask for terabytes or run for years."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fedcluster.errors import ConfigError

RUN_BOUNDS = {  # run keys
    "num_clients": 100_000, "rounds": 1_000_000, "local_epochs": 1_000, "batch_size": 1_000_000,
    "workers": 1_024,  # ranks: at most the clients (and the cores), checked where ranks are started
}
PARAM_BOUNDS = {  # algorithm, scenario and model parameters of this name, whatever the section
    # numbers of clusters, groups, concepts and candidates
    "num_clusters": 1_000, "max_clusters": 1_000, "num_groups": 1_000, "concepts": 1_000, "n_basis": 1_000,
    "num_components": 1_000,
    "k": 1_000, "replicate": 1_000,
    # local computation per client and round
    "pretrain_steps": 100_000, "local_steps": 100_000, "steps": 100_000, "local_epochs": 1_000,
    "pretrain_scale": 10_000, "loss_sampling_size": 100_000, "test_em_iters": 10_000, "orth_iters": 10_000,
    "local_batch": 1_000_000, "batch": 1_000_000, "personal_epochs": 1_000, "balanced_epochs": 1_000,
    "clf_epochs": 1_000, "balanced_per_class": 10_000_000,
    # rounds
    "cluster_round": 1_000_000, "stable_rounds": 1_000_000, "patience": 1_000_000, "warmup": 1_000_000,
    "t_cl": 1_000_000, "period": 1_000_000, "stable_window": 1_000_000, "phase1_rounds": 1_000_000,
    "isolation": 1_000_000, "align_from": 1_000_000,
    # drift schedules: a round × client table of concepts is kept (data.drift)
    "at": 10_000, "back": 10_000, "window": 10_000,
    # data sizes (synthetic sets, anchors, images)
    "samples": 10_000_000, "pool_size": 10_000_000, "test_size": 10_000_000, "val_size": 10_000_000,
    "sizes": 10_000_000, "num_anchors": 10_000_000, "phase1_clients": 100_000, "d": 100_000,
    "image_size": 1_024, "classes_per_client": 100_000,
    # model widths and groups
    "hidden": 65_536, "channels": 65_536, "fc": 65_536, "groups": 65_536, "latent_dim": 65_536,
    # restarts, inner loops, ranks and the clients a computation spans
    "n_init": 1_000, "inner_steps": 100_000, "rank": 10_000, "pca_clients": 100_000,
    # thresholds counted in clients or samples, label shifts and maps, severities, decimals
    "min_size": 100_000, "min_cluster_size": 100_000, "min_samples": 10_000_000, "anchor_min_samples": 10_000_000,
    "min_val": 10_000_000, "shift": 100_000, "perms": 100_000, "severities": 1_000, "quantize_digits": 100,
}
FLOAT32_MAX = 3.4028234663852886e38  # training computes in float32: a method's rate or weight past it overflows
FLOAT32_SECTIONS = ("algorithm", "model")  # sections whose numbers enter training
MAX_WAIT_SECONDS = 7 * 24 * 3600  # a timeout of a week or less (inf would wait for ever)
MAX_SEEDS = 1_000  # seeds of one reproduced experiment


def check_bound(key: str, value: Any, bound: int) -> None:
    """Refuse ``value`` (a number, or a list of them) above ``bound``."""
    for v in _numbers(value):
        if v > bound:
            raise ConfigError(f"{key}={_short(value)} is above its upper bound {bound:,}; give a value of at most "
                              f"{bound} (the bounds of every size are listed in the configuration reference)")


def check_run_bounds(cfg: Any) -> None:
    for key, bound in RUN_BOUNDS.items():
        check_bound(key, getattr(cfg, key), bound)


def check_param_bounds(section: str, params: dict[str, Any]) -> None:
    """Every size-like parameter at most its bound; a method's or model's numbers within float32's range."""
    for key, value in params.items():
        if key in PARAM_BOUNDS:
            check_bound(f"{section}.{key}", value, PARAM_BOUNDS[key])
        if section in FLOAT32_SECTIONS and isinstance(value, float) and not abs(value) <= FLOAT32_MAX:
            raise ConfigError(f"{section}.{key}={value:g} is beyond the float32 range training computes in (about "
                              f"3.4e38): give a finite, smaller {key}")


def _numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _numbers(v)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."
