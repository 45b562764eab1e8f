"""Fashion-MNIST (Xiao et al., 2017) from local idx files; used by HCFL paper/FedRC paper's FMNIST benchmarks.

By default the files are read from where Debian's ``dataset-fashion-mnist`` package installs
them, ``/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``.
Any folder with the same four files (``.gz`` or plain) can be passed instead, or a torchvision root (which holds
them in ``FashionMNIST/raw``).
"""

from __future__ import annotations

from pathlib import Path

from fedcluster.data.sources.base import ArrayDataset
from fedcluster.data.sources.idx import load_idx_dataset

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def load_fashion_mnist(data_dir: str | Path | None = None) -> ArrayDataset:
    """Fashion-MNIST: 60,000 train / 10,000 test images ``[n, 1, 28, 28]`` in [0, 1], 10 classes."""
    directory = DEBIAN_DIR if data_dir is None else Path(data_dir)
    how_to_get = (
        "install it with `apt-get install dataset-fashion-mnist` (Debian/Ubuntu; files go to "
        f"{DEBIAN_DIR}), or pass data_dir= pointing at a folder holding these four files "
        "(from https://github.com/zalandoresearch/fashion-mnist)"
    )
    folders = [directory, directory / "FashionMNIST" / "raw"]  # the folder, or a torchvision root
    return load_idx_dataset("fashion-mnist", folders, IDX_FILES, len(CLASSES), how_to_get)
