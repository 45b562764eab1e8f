"""CIFAR-10 / CIFAR-100 from the official "python version" pickle batches (nothing is downloaded).

CIFAR-10 (HCFL paper/FedRC paper benchmarks, CFL-GP paper Exp 2): ``cifar-10-batches-py/data_batch_1..5`` and
``test_batch``.
CIFAR-100 (HCFL paper/FedRC paper): ``cifar-100-python/train`` and ``test``. Each batch is a pickled dict with
``b"data"`` (uint8 ``[n, 3072]``: the red, green and blue 32×32 planes, each row-major) and
``b"labels"`` (CIFAR-10) or ``b"fine_labels"`` / ``b"coarse_labels"`` (CIFAR-100).

``data_dir`` may be the extracted folder itself or its parent. The batches are unpickled with a
restricted unpickler that only admits the few numpy globals these files need, so a stray pickle
cannot run arbitrary code.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from fedcluster.data.sources.base import ArrayDataset, DatasetNotFoundError, images_to_float
from fedcluster.data.sources.idx import check_fits
from fedcluster.errors import DataFileError

CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR100_FOLDER = "cifar-100-python"
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
# globals a CIFAR batch may reference (Python 2 pickles name numpy.core, numpy >= 2 numpy._core)
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _BatchUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"CIFAR batch refers to {module}.{name}, which is not allowed")
        if module.startswith("numpy.core") and hasattr(np, "_core"):
            module = "numpy._core" + module[len("numpy.core"):]  # avoid numpy 2's deprecation shim
        return super().find_class(module, name)


def read_batch(path: str | Path) -> dict[bytes, Any]:
    """Unpickle one CIFAR batch file (keys stay ``bytes``, as written by Python 2).

    Anything that is not a CIFAR batch (garbage, truncation, another pickle) raises
    :class:`DataFileError` naming the file.
    """
    path = Path(path)
    try:
        check_fits(path, path.stat().st_size)
        with open(path, "rb") as f:
            batch = _BatchUnpickler(f, encoding="bytes").load()
    except DataFileError:
        raise
    except (pickle.UnpicklingError, EOFError, OSError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, OverflowError, UnicodeError, ImportError, MemoryError, RecursionError) as e:
        reason = " ".join(str(e).split())[:120] or type(e).__name__
        raise DataFileError(f"{path} is not a readable CIFAR batch ({reason}); it is truncated or corrupt: "
                            f"download the python version again from {_URL}") from None
    if not isinstance(batch, dict) or b"data" not in batch:
        raise DataFileError(f"{path} is not a CIFAR batch (no b'data' entry); pass data_dir= the extracted "
                            "python-version folder")
    return batch


def _images(batch: dict[bytes, Any], path: Path) -> np.ndarray:
    data = batch[b"data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        shape = getattr(data, "shape", type(data).__name__)
        raise DataFileError(f"{path}: b'data' is {getattr(data, 'dtype', '')} {shape}, expected uint8 [n, 3072]; "
                            "the file is corrupt")
    return data.reshape(-1, 3, 32, 32)


def _locate(data_dir: str | Path, folder: str, files: tuple[str, ...], name: str) -> Path:
    root = Path(data_dir)
    candidates = [root, root / folder]
    for directory in candidates:
        if all((directory / f).is_file() for f in files):
            return directory
    how_to_get = (
        f"download the python version from {_URL}, extract it (tar xzf ...) and pass data_dir= "
        f"pointing at the {folder}/ folder or its parent"
    )
    expected = [f"{folder}/{f}" for f in files]
    missing = [f for f in files if not (root / f).is_file() and not (root / folder / f).is_file()]
    raise DatasetNotFoundError(name, candidates, expected, how_to_get, missing)


def _load(directory: Path, files: tuple[str, ...], key: bytes, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for f in files:
        batch = read_batch(directory / f)
        if key not in batch:
            raise DataFileError(f"{directory / f} has no {key!r} entry; it is not a batch of this data set")
        x = _images(batch, directory / f)
        try:
            y = np.asarray(batch[key])
        except (TypeError, ValueError, OverflowError):
            y = np.zeros((0, 0))
        if y.dtype.kind not in "iu":
            raise DataFileError(f"{directory / f}: its {key!r} are {y.dtype}, not integers; the file is corrupt")
        y = y.astype(np.int64)
        if y.ndim != 1 or len(y) != len(x):
            raise DataFileError(f"{directory / f}: {len(x)} images but labels of shape {y.shape}; the file is corrupt")
        if len(y) and (y.min() < 0 or y.max() >= num_classes):
            raise DataFileError(f"{directory / f} holds labels outside 0..{num_classes - 1}; the file is corrupt")
        xs.append(x)
        ys.append(y)
    return images_to_float(np.concatenate(xs)), np.concatenate(ys)


def load_cifar10(data_dir: str | Path) -> ArrayDataset:
    """CIFAR-10: 50,000 train / 10,000 test images ``[n, 3, 32, 32]`` in [0, 1], 10 classes."""
    directory = _locate(data_dir, CIFAR10_FOLDER, (*CIFAR10_TRAIN, "test_batch"), "cifar10")
    x_train, y_train = _load(directory, CIFAR10_TRAIN, b"labels", 10)
    x_test, y_test = _load(directory, ("test_batch",), b"labels", 10)
    return ArrayDataset("cifar10", x_train, y_train, x_test, y_test, num_classes=10)


def load_cifar100(data_dir: str | Path, label: str = "fine") -> ArrayDataset:
    """CIFAR-100: 50,000 train / 10,000 test images ``[n, 3, 32, 32]`` in [0, 1].

    ``label="fine"`` gives the 100 classes, ``label="coarse"`` the 20 superclasses.
    """
    if label not in ("fine", "coarse"):
        raise ValueError(f"label must be 'fine' or 'coarse', got {label!r}")
    directory = _locate(data_dir, CIFAR100_FOLDER, ("train", "test"), "cifar100")
    key = f"{label}_labels".encode()
    num_classes = 100 if label == "fine" else 20
    x_train, y_train = _load(directory, ("train",), key, num_classes)
    x_test, y_test = _load(directory, ("test",), key, num_classes)
    return ArrayDataset(f"cifar100_{label}", x_train, y_train, x_test, y_test, num_classes=num_classes)
