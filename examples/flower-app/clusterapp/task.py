"""The app's own model and data: scikit-learn's handwritten digits (bundled with scikit-learn, nothing to
download), split over the partitions (of unequal sizes), where partition p sees its images rotated by
(p mod 3) x 90 degrees: three groups of clients that a single model serves badly."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

GROUPS = 3


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def group_of(partition_id: int) -> int:
    return partition_id % GROUPS


@lru_cache(maxsize=1)
def _digits():  # noqa: ANN202 - scikit-learn's Bunch, read once per process
    return load_digits()


def partition_arrays(partition_id: int, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """This partition's images [N, 1, 8, 8] (scaled to [0, 1], rotated by its group) and labels."""
    digits = _digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    shares = 1.0 + 0.5 * (np.arange(num_partitions) % 4)  # partitions of unequal sizes
    cuts = np.round(np.cumsum(shares) / shares.sum() * len(order)).astype(int)
    rows = order[(cuts[partition_id - 1] if partition_id else 0):cuts[partition_id]]
    images = np.rot90(digits.images[rows] / 16.0, k=group_of(partition_id), axes=(1, 2))
    return np.ascontiguousarray(images[:, None], dtype=np.float32), digits.target[rows].astype(np.int64)


def load_data(partition_id: int, num_partitions: int, batch_size: int = 32) -> tuple[DataLoader, DataLoader]:
    """Train (80 %) and validation (20 %) loaders of one partition."""
    x, y = partition_arrays(partition_id, num_partitions)
    cut = int(0.8 * len(y))
    train = TensorDataset(torch.from_numpy(x[:cut]), torch.from_numpy(y[:cut]))
    val = TensorDataset(torch.from_numpy(x[cut:]), torch.from_numpy(y[cut:]))
    return DataLoader(train, batch_size=batch_size, shuffle=True), DataLoader(val, batch_size=batch_size)


def test(model: nn.Module, loader: DataLoader) -> tuple[float, float]:
    """Mean loss and accuracy of ``model`` on ``loader``."""
    model.eval()
    loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss += float(nn.functional.cross_entropy(out, y, reduction="sum"))
            correct += int((out.argmax(1) == y).sum())
            n += len(y)
    return loss / max(n, 1), correct / max(n, 1)
