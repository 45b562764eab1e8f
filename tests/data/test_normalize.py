"""Input standardisation (data.normalize): statistics, the dataset defaults, and synthetic data untouched."""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.catalog.registry import DATASETS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.data.normalize import destandardize


def _fed(*overrides: str):
    cfg, typed = resolve(load_raw(None, ["num_clients=6", *overrides]))
    return build_federation(cfg, typed["scenario"])


def test_normalize_standardises_the_training_inputs_and_maps_every_split_alike() -> None:
    raw, norm = _fed("normalize=false"), _fed("normalize=true")
    x = norm.train.x.transpose(0, 1).reshape(norm.train.x.shape[1], -1)
    np.testing.assert_allclose(x.mean(1).numpy(), 0.0, atol=1e-5)
    np.testing.assert_allclose(x.std(1).numpy(), 1.0, atol=1e-4)
    mean, sd = norm.info["normalization"]["mean"][0], norm.info["normalization"]["std"][0]
    for a, b in ((raw.val, norm.val), (raw.test, norm.test)):
        torch.testing.assert_close(b.x, (a.x - mean) / sd)
    assert "normalization" not in raw.info


def test_destandardize_inverts_standardize() -> None:
    raw, norm = _fed("normalize=false"), _fed("normalize=true")
    stats = norm.info["normalization"]
    for a, b in ((raw.train, norm.train), (raw.val, norm.val), (raw.test, norm.test)):
        torch.testing.assert_close(destandardize(b.x, stats), a.x, atol=1e-6, rtol=0)
    assert destandardize(raw.train.x, None) is raw.train.x  # not standardised: unchanged


def test_dataset_defaults() -> None:
    assert "normalization" not in _fed().info  # digits (the demo) stays in [0, 1] unless asked
    lines = _fed("dataset=cflgp-lines", "scenario=cflgp-lines", "normalize=true")
    assert "normalization" not in lines.info  # synthetic inputs are never touched
    assert DATASETS.get("fashion-mnist").obj.standardize and not DATASETS.get("digits").obj.standardize
