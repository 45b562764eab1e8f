"""MNIST and EMNIST from local idx files (nothing is downloaded).

MNIST (LeCun et al.) backs FedMD paper §V-D and CFL-GP paper §5.2 (rotated MNIST); EMNIST (Cohen et al., 2017)
backs CFL-GP paper's Exp 3 (App. F.8). Both use the idx format, plain or ``.gz``.

EMNIST orientation: the EMNIST idx files store every 28×28 image transposed (rows and columns
swapped relative to the upright character) — a known quirk of the conversion from the NIST
originals. :func:`load_emnist` transposes each image back, so characters come out upright like
MNIST digits. EMNIST ``letters`` labels are 1..26 in the files; they are shifted to 0..25.
"""

from __future__ import annotations

from pathlib import Path

from fedcluster.data.sources.base import ArrayDataset
from fedcluster.data.sources.idx import load_idx_dataset

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# split name → number of classes (Cohen et al., 2017, Table II)
EMNIST_SPLITS = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 26, "digits": 10, "mnist": 10}


def load_mnist(data_dir: str | Path) -> ArrayDataset:
    """MNIST: 60,000 train / 10,000 test images ``[n, 1, 28, 28]`` in [0, 1], 10 classes.

    Reads the four standard files (``train-images-idx3-ubyte`` etc., with or without ``.gz``)
    from ``data_dir`` or, torchvision's layout, ``data_dir/MNIST/raw``.
    """
    root = Path(data_dir)
    how_to_get = (
        "download the four files from http://yann.lecun.com/exdb/mnist/ (or reuse a torchvision "
        "MNIST/raw folder) and pass data_dir= pointing at them"
    )
    return load_idx_dataset("mnist", [root, root / "MNIST" / "raw"], MNIST_FILES, 10, how_to_get)


def load_emnist(data_dir: str | Path, split: str = "balanced") -> ArrayDataset:
    """EMNIST ``split`` (byclass, bymerge, balanced, letters, digits, mnist), images upright.

    Reads ``emnist-{split}-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz]`` from ``data_dir``,
    ``data_dir/gzip`` (the layout of NIST's ``gzip.zip``) or ``data_dir/EMNIST/raw`` (torchvision).
    """
    if split not in EMNIST_SPLITS:
        raise ValueError(f"unknown EMNIST split {split!r}; choose one of {sorted(EMNIST_SPLITS)}")
    root = Path(data_dir)
    files = {
        "train_images": f"emnist-{split}-train-images-idx3-ubyte",
        "train_labels": f"emnist-{split}-train-labels-idx1-ubyte",
        "test_images": f"emnist-{split}-test-images-idx3-ubyte",
        "test_labels": f"emnist-{split}-test-labels-idx1-ubyte",
    }
    how_to_get = (
        "download gzip.zip from https://www.nist.gov/itl/products-and-services/emnist-dataset, "
        "unzip it and pass data_dir= pointing at the unzipped folder (or its gzip/ subfolder)"
    )
    return load_idx_dataset(
        f"emnist_{split}",
        [root, root / "gzip", root / "EMNIST" / "raw"],
        files,
        EMNIST_SPLITS[split],
        how_to_get,
        transpose=True,
        label_offset=1 if split == "letters" else 0,
    )
