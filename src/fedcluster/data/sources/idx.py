"""Reader for the idx file format of MNIST, Fashion-MNIST and EMNIST (plain or gzip-compressed).

Format (LeCun et al., http://yann.lecun.com/exdb/mnist/): a 4-byte magic number
``0x00 0x00 <type> <ndim>``, then ``ndim`` big-endian uint32 sizes, then the data in C order,
big-endian. ``idx1`` files hold labels ``[n]``, ``idx3`` files hold images ``[n, rows, cols]``.
Compression is detected from the gzip magic bytes, not from the file name.

Besides :func:`read_idx` this module locates the usual four files of an idx data set
(``{train,t10k}-{images-idx3,labels-idx1}-ubyte`` and variants) and turns them into an
:class:`~fedcluster.data.sources.base.ArrayDataset`.
"""

from __future__ import annotations

import gzip
import math
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from fedcluster.data.host_memory import available_bytes, format_bytes
from fedcluster.data.sources.base import ArrayDataset, DatasetNotFoundError, images_to_float
from fedcluster.errors import DataFileError

# idx type byte → big-endian numpy dtype
_IDX_TYPES: dict[int, str] = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_GZIP_MAGIC = b"\x1f\x8b"
_MAX_DEFLATE_RATIO = 1032  # deflate cannot inflate one byte to more than ~1032 (RFC 1951 block limits)
IDX_KEYS = ("train_images", "train_labels", "test_images", "test_labels")


def read_idx(path: str | Path) -> np.ndarray:
    """Read one idx file (``.gz`` or plain) into a native-endian array of its stored shape.

    The header is read first and fixes how many bytes the file must hold; a ``.gz`` is refused before
    it is inflated when its gzip trailer or its size disagree with that (a decompression bomb), and it
    is never inflated beyond it. Every defect raises :class:`DataFileError` naming the file.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            compressed = f.read(2) == _GZIP_MAGIC
        if compressed:
            with gzip.open(path, "rb") as stream:
                return _read_idx_stream(stream, path, path.stat().st_size)
        with path.open("rb") as stream:
            return _read_idx_stream(stream, path, None)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise DataFileError(f"{path} cannot be read as an idx file ({reason}); it is truncated or corrupt: "
                            "download it again") from None


def _read_idx_stream(stream: BinaryIO | gzip.GzipFile, path: Path, gz_size: int | None) -> np.ndarray:
    magic = stream.read(4)
    if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _IDX_TYPES:
        raise DataFileError(f"{path} is not an idx file (bad magic number {magic.hex() or 'none'}); "
                            "pass data_dir= a folder holding the original idx files")
    dtype = np.dtype(_IDX_TYPES[magic[2]])
    ndim = magic[3]
    dims = stream.read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise DataFileError(f"{path} is truncated inside its idx header; download it again")
    shape = tuple(int.from_bytes(dims[4 * i: 4 * i + 4], "big") for i in range(ndim))
    payload = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    total = 4 + 4 * ndim + payload
    if gz_size is not None:
        _check_gzip_size(path, gz_size, total)
    elif (size := path.stat().st_size) != total:
        raise DataFileError(f"{path}: its idx header says shape {shape} ({total} bytes) but the file has "
                            f"{size} bytes; it is truncated or corrupt: download it again")
    check_fits(path, payload)
    data = stream.read(payload + 1)
    if len(data) != payload:
        what = "inflates to more bytes" if len(data) > payload else "holds fewer bytes"
        raise DataFileError(f"{path} {what} than its idx header says (shape {shape}); "
                            "it is truncated or corrupt: download it again")
    return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="), copy=True)


def _check_gzip_size(path: Path, gz_size: int, total: int) -> None:
    """Before inflating: the gzip trailer's ISIZE (size mod 2**32) and deflate's ratio limit must allow ``total``."""
    with path.open("rb") as f:
        f.seek(max(0, gz_size - 4))
        isize = int.from_bytes(f.read(4), "little")
    if isize != total % 2**32:
        raise DataFileError(f"{path}: its gzip trailer says it inflates to {isize} bytes but its idx header "
                            f"implies {total}; refusing to inflate a corrupt or hostile file: download it again")
    if total > _MAX_DEFLATE_RATIO * gz_size:
        raise DataFileError(f"{path}: its idx header implies {total} bytes, more than {gz_size} compressed bytes "
                            "can inflate to; refusing to inflate a corrupt or hostile file: download it again")


def check_fits(path: Path, nbytes: int) -> None:
    """Refuse to read ``nbytes`` of data when they (twice: file buffer and array) do not fit in memory."""
    free = available_bytes()
    if free is not None and 2 * nbytes > free:
        raise DataFileError(f"{path} needs {format_bytes(2 * nbytes)} to load but only {format_bytes(free)} "
                            "is available; free memory or use a smaller data set")


def find_idx(directory: str | Path, name: str) -> Path | None:
    """``directory/name`` or ``directory/name.gz``, whichever exists (plain first), else None."""
    for candidate in (Path(directory) / name, Path(directory) / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def load_idx_dataset(
    name: str,
    directories: Sequence[str | Path],
    files: Mapping[str, str],
    num_classes: int,
    how_to_get: str,
    transpose: bool = False,
    label_offset: int = 0,
) -> ArrayDataset:
    """Load a train/test pair of idx image and label files from the first directory holding all four.

    Args:
        name: data set name for the result and for error messages.
        directories: candidate folders, searched in order.
        files: file names (without ``.gz``) under the keys of :data:`IDX_KEYS`.
        num_classes: number of classes.
        how_to_get: instructions shown when no folder holds the files.
        transpose: swap rows and columns of every image (EMNIST stores images transposed).
        label_offset: subtracted from every label (EMNIST ``letters`` labels start at 1).
    """
    for directory in directories:
        paths = {key: find_idx(directory, files[key]) for key in IDX_KEYS}
        if all(p is not None for p in paths.values()):
            break
    else:
        expected = [f"{files[key]}  (or {files[key]}.gz)" for key in IDX_KEYS]
        first = directories[0] if directories else Path(".")
        missing = [files[key] for key in IDX_KEYS if find_idx(first, files[key]) is None]
        raise DatasetNotFoundError(name, directories, expected, how_to_get, missing)
    arrays = {key: read_idx(p) for key, p in paths.items() if p is not None}
    parts: dict[str, np.ndarray] = {}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        image_file, label_file = paths[f"{split}_images"], paths[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DataFileError(
                f"{name} {split}: expected images [n, rows, cols] in {image_file} and labels [n] in "
                f"{label_file}, got {images.shape} and {labels.shape}; the files do not belong together"
            )
        if images.dtype.kind == "f" and not np.isfinite(images).all():
            raise DataFileError(f"{image_file} holds NaN or infinite pixel values; use the original files")
        if 0 in images.shape[1:]:
            raise DataFileError(f"{image_file} holds images of {images.shape[1]}x{images.shape[2]} pixels (no "
                                "pixels at all); it is corrupt: use the original files")
        if labels.dtype.kind not in "iu":
            raise DataFileError(f"{label_file} holds {labels.dtype} labels, not integers; use the original files")
        if transpose:
            images = images.transpose(0, 2, 1)
        with np.errstate(over="ignore"):
            parts[f"x_{split}"] = images_to_float(images)
        if not np.isfinite(parts[f"x_{split}"]).all():
            raise DataFileError(f"{image_file} holds pixel values beyond the float32 range (|x| > 3.4e38); it is "
                                "corrupt or not an image file: use the original files")
        y = labels.astype(np.int64) - label_offset
        if len(y) and (y.min() < 0 or y.max() >= num_classes):
            raise DataFileError(f"{label_file} holds labels outside {label_offset}..{num_classes - 1 + label_offset}"
                                f" (found {int(y.min()) + label_offset}..{int(y.max()) + label_offset}); "
                                "it is corrupt or belongs to another data set")
        parts[f"y_{split}"] = y
    if parts["x_train"].shape[1:] != parts["x_test"].shape[1:]:
        raise DataFileError(f"{paths['train_images']} holds images of {parts['x_train'].shape[2:]} pixels but "
                            f"{paths['test_images']} of {parts['x_test'].shape[2:]}; one of them is corrupt")
    return ArrayDataset(name=name, num_classes=num_classes, **parts)
