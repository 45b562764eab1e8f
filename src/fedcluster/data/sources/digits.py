"""scikit-learn's bundled handwritten digits (UCI optdigits test set): a tiny, always-present data set.

1,797 grey 8×8 images with values 0..16 and 10 classes, shipped inside scikit-learn (no download).
It has no official test split, so a deterministic stratified 80/20 split (``random_state=seed``)
is made here. Used for fast smoke tests and tutorials in place of MNIST.
"""

from __future__ import annotations

import numpy as np

from fedcluster.data.sources.base import ArrayDataset, images_to_float


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> ArrayDataset:
    """Digits as ``[n, 1, 8, 8]`` float32 in [0, 1]: 1,437 train / 360 test with the defaults."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    # imported here: a run whose federation is cached (a Flower node's per-message process) needs no sklearn
    from sklearn.datasets import load_digits as _sk_load_digits
    from sklearn.model_selection import train_test_split

    bunch = _sk_load_digits()
    images = np.asarray(bunch.images)
    labels = np.asarray(bunch.target, dtype=np.int64)
    idx_train, idx_test = train_test_split(
        np.arange(len(labels)), test_size=test_fraction, stratify=labels, random_state=seed
    )
    idx_train, idx_test = np.sort(idx_train), np.sort(idx_test)
    x = images_to_float(images, scale=16.0)
    return ArrayDataset(
        "digits", x[idx_train], labels[idx_train], x[idx_test], labels[idx_test], num_classes=10
    )
