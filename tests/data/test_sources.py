"""Real-data loaders: tiny files in each standard format are written and read back."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from fedcluster.data.sources.base import ArrayDataset, DatasetNotFoundError
from fedcluster.data.sources.cifar import load_cifar10, load_cifar100
from fedcluster.data.sources.digits import load_digits
from fedcluster.data.sources.fashion_mnist import DEBIAN_DIR, load_fashion_mnist
from fedcluster.data.sources.idx import read_idx
from fedcluster.data.sources.mnist import load_emnist, load_mnist
from fedcluster.errors import DataFileError

MNIST_NAMES = (
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
)


def idx_bytes(a: np.ndarray) -> bytes:
    """The idx encoding of a uint8 array, written independently of the reader under test."""
    header = struct.pack(">BBBB", 0, 0, 0x08, a.ndim) + struct.pack(f">{a.ndim}I", *a.shape)
    return header + a.astype(np.uint8).tobytes()


def write_idx(path: Path, a: np.ndarray, gz: bool) -> None:
    data = idx_bytes(a)
    if gz:
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)


def make_images(n: int, rng: np.random.Generator, side: int = 28) -> np.ndarray:
    """Random images whose top row is bright and left column dark: the orientation is checkable."""
    x = rng.integers(0, 256, size=(n, side, side), dtype=np.uint8)
    x[:, 0, :] = 255
    x[:, 1:, 0] = 0
    return x


def write_mnist_layout(folder: Path, names: tuple[str, ...], gz: bool, n_train: int = 7, n_test: int = 3,
                       transpose: bool = False, labels: tuple[int, int] = (0, 10)) -> dict[str, np.ndarray]:
    """Write the four idx files (images stored transposed if asked); labels drawn from range(*labels)."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {
        "x_train": make_images(n_train, rng), "y_train": rng.integers(*labels, n_train).astype(np.uint8),
        "x_test": make_images(n_test, rng), "y_test": rng.integers(*labels, n_test).astype(np.uint8),
    }
    stored = [arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"]]
    for name, a in zip(names, stored, strict=True):
        write_idx(folder / name, a.transpose(0, 2, 1) if (transpose and a.ndim == 3) else a, gz)
    return arrays


def check_images(ds: ArrayDataset, arrays: dict[str, np.ndarray], label_offset: int = 0) -> None:
    for split in ("train", "test"):
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        assert x.dtype == np.float32 and y.dtype == np.int64
        assert x.shape == (len(arrays[f"x_{split}"]), 1, 28, 28)
        assert x.min() >= 0.0 and x.max() <= 1.0
        np.testing.assert_allclose(x[:, 0] * 255, arrays[f"x_{split}"], atol=1e-3)
        np.testing.assert_array_equal(y, arrays[f"y_{split}"].astype(np.int64) - label_offset)
        assert np.all(x[:, 0, 0, :] == 1.0) and np.all(x[:, 0, 1:, 0] == 0.0)  # upright


# -- idx -------------------------------------------------------------------------------------
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_roundtrip(tmp_path: Path, gz: bool) -> None:
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a-idx3-ubyte", a, gz)
    got = read_idx(tmp_path / ("a-idx3-ubyte.gz" if gz else "a-idx3-ubyte"))
    assert got.shape == (2, 3, 4) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, a)


def test_read_idx_big_endian_int32(tmp_path: Path) -> None:
    a = np.array([1, -2, 70000], dtype=">i4")
    (tmp_path / "b").write_bytes(struct.pack(">BBBBI", 0, 0, 0x0C, 1, 3) + a.tobytes())
    np.testing.assert_array_equal(read_idx(tmp_path / "b"), [1, -2, 70000])


def test_read_idx_rejects_bad_files(tmp_path: Path) -> None:
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an idx file"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(idx_bytes(np.zeros((2, 2, 2), np.uint8))[:-1])
    with pytest.raises(ValueError, match="header says"):
        read_idx(tmp_path / "short")


# -- MNIST / Fashion-MNIST / EMNIST -----------------------------------------------------------
@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist(tmp_path: Path, gz: bool) -> None:
    arrays = write_mnist_layout(tmp_path, MNIST_NAMES, gz)
    ds = load_mnist(tmp_path)
    assert ds.name == "mnist" and ds.num_classes == 10
    check_images(ds, arrays)


def test_load_mnist_torchvision_layout(tmp_path: Path) -> None:
    arrays = write_mnist_layout(tmp_path / "MNIST" / "raw", MNIST_NAMES, gz=False)
    check_images(load_mnist(tmp_path), arrays)


def test_load_fashion_mnist_from_dir(tmp_path: Path) -> None:
    arrays = write_mnist_layout(tmp_path, MNIST_NAMES, gz=True)
    ds = load_fashion_mnist(tmp_path)
    assert ds.name == "fashion-mnist" and ds.num_classes == 10
    check_images(ds, arrays)


@pytest.mark.parametrize(("split", "classes", "offset"), [("balanced", 47, 0), ("letters", 26, 1)])
def test_load_emnist_transposes_back(tmp_path: Path, split: str, classes: int, offset: int) -> None:
    kinds = ("images-idx3", "labels-idx1")
    names = tuple(f"emnist-{split}-{s}-{kind}-ubyte" for s in ("train", "test") for kind in kinds)
    # images stored transposed, as in the real files; letters labels are 1..26 on disk
    labels = (offset, classes + offset)
    arrays = write_mnist_layout(tmp_path / "gzip", names, gz=True, transpose=True, labels=labels)
    ds = load_emnist(tmp_path, split=split)
    assert ds.name == f"emnist_{split}" and ds.num_classes == classes
    check_images(ds, arrays, label_offset=offset)


def test_load_emnist_unknown_split(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown EMNIST split"):
        load_emnist(tmp_path, split="nope")


def test_missing_files_error_message(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as info:
        load_fashion_mnist(tmp_path / "empty")
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert str(tmp_path / "empty") in msg
    for name in MNIST_NAMES:
        assert name in msg
    assert "apt-get install dataset-fashion-mnist" in msg and "data_dir=" in msg
    restored = pickle.loads(pickle.dumps(info.value))
    assert str(restored) == msg

    with pytest.raises(DatasetNotFoundError, match="emnist-balanced-train-images-idx3-ubyte"):
        load_emnist(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="cifar-10-batches-py/data_batch_1"):
        load_cifar10(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="cifar-100-python/train"):
        load_cifar100(tmp_path)


def test_partial_files_are_reported_missing(tmp_path: Path) -> None:
    write_mnist_layout(tmp_path, MNIST_NAMES, gz=False)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetNotFoundError, match="missing: t10k-labels-idx1-ubyte\\n"):
        load_mnist(tmp_path)


# -- CIFAR -----------------------------------------------------------------------------------
def cifar_images(n: int, rng: np.random.Generator) -> np.ndarray:
    """[n, 3, 32, 32] uint8 with channel c's top-left pixel = 10·c + 1 (checks plane order)."""
    x = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
    x[:, :, 0, 0] = np.array([1, 11, 21], dtype=np.uint8)
    return x


def dump(path: Path, obj: dict, legacy: bool = False) -> None:
    """Protocol-2 pickle; ``legacy`` names numpy.core like the real (numpy 1, Python 2) batches."""
    data = pickle.dumps(obj, protocol=2)
    if legacy:
        data = data.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    path.write_bytes(data)


@pytest.mark.parametrize("give_parent", [True, False])
def test_load_cifar10(tmp_path: Path, give_parent: bool) -> None:
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    xs, ys = [], []
    for i in range(1, 6):
        x, y = cifar_images(4, rng), rng.integers(0, 10, 4).tolist()
        batch = {b"batch_label": b"x", b"data": x.reshape(4, -1), b"labels": y}
        dump(folder / f"data_batch_{i}", batch, legacy=i % 2 == 1)
        xs.append(x)
        ys += y
    xt, yt = cifar_images(3, rng), [9, 0, 5]
    dump(folder / "test_batch", {b"data": xt.reshape(3, -1), b"labels": yt})
    ds = load_cifar10(tmp_path if give_parent else folder)
    assert ds.num_classes == 10 and ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (3, 3, 32, 32)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    np.testing.assert_allclose(ds.x_train * 255, np.concatenate(xs), atol=1e-3)
    np.testing.assert_array_equal(ds.y_train, ys)
    np.testing.assert_array_equal(ds.y_test, yt)
    np.testing.assert_allclose(ds.x_test[:, :, 0, 0] * 255, [[1, 11, 21]] * 3, atol=1e-3)
    assert ds.x_train.min() >= 0.0 and ds.x_train.max() <= 1.0


@pytest.mark.parametrize(("label", "classes"), [("fine", 100), ("coarse", 20)])
def test_load_cifar100(tmp_path: Path, label: str, classes: int) -> None:
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    parts = {}
    for split, n in (("train", 6), ("test", 2)):
        x = cifar_images(n, rng)
        fine, coarse = rng.integers(0, 100, n).tolist(), rng.integers(0, 20, n).tolist()
        dump(folder / split, {b"filenames": [b"a"] * n, b"data": x.reshape(n, -1), b"fine_labels": fine,
                              b"coarse_labels": coarse})
        parts[split] = (x, fine if label == "fine" else coarse)
    ds = load_cifar100(tmp_path, label=label)
    assert ds.num_classes == classes and ds.name == f"cifar100_{label}"
    np.testing.assert_allclose(ds.x_train * 255, parts["train"][0], atol=1e-3)
    np.testing.assert_array_equal(ds.y_train, parts["train"][1])
    np.testing.assert_array_equal(ds.y_test, parts["test"][1])
    with pytest.raises(ValueError, match="fine"):
        load_cifar100(tmp_path, label="medium")


def test_cifar_refuses_foreign_pickles(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    dump(folder / "train", {b"data": np.zeros((1, 3072), np.uint8), b"fine_labels": [0], b"x": Path("/")})
    dump(folder / "test", {b"data": np.zeros((1, 3072), np.uint8), b"fine_labels": [0]})
    with pytest.raises(DataFileError, match="not allowed"):  # a one-line user error, nothing executed
        load_cifar100(folder)


# -- digits and the real Fashion-MNIST ----------------------------------------------------------
def test_load_digits() -> None:
    ds = load_digits()
    assert ds.x_train.shape == (1437, 1, 8, 8) and ds.x_test.shape == (360, 1, 8, 8)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64 and ds.num_classes == 10
    assert ds.x_train.min() == 0.0 and ds.x_train.max() == 1.0
    assert set(np.unique(ds.y_test)) == set(range(10))  # stratified
    again = load_digits()
    np.testing.assert_array_equal(ds.y_test, again.y_test)


@pytest.mark.skipif(
    not (DEBIAN_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason=f"Fashion-MNIST not installed in {DEBIAN_DIR} (apt-get install dataset-fashion-mnist)",
)
def test_real_fashion_mnist() -> None:
    ds = load_fashion_mnist()
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.num_classes == 10
    np.testing.assert_array_equal(np.bincount(ds.y_train), [6000] * 10)
    np.testing.assert_array_equal(np.bincount(ds.y_test), [1000] * 10)
    assert ds.x_train.dtype == np.float32 and ds.x_train.min() >= 0.0 and ds.x_train.max() <= 1.0
