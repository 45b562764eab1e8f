"""Tiny-ImageNet (Le & Yang, 2015; the FedRC paper's third data set) from its extracted folder.

``tiny-imagenet-200/`` holds ``wnids.txt`` (the 200 class ids, one a line: label = line number),
``train/<wnid>/images/*.JPEG`` (500 a class) and ``val/images/*.JPEG`` with ``val/val_annotations.txt`` (file,
wnid, box; tab-separated; 50 a class). Images are 64×64 RGB (a few are stored grey and are converted). The
official test images carry no labels, so the validation set is the test split, as in the papers that use it.
Images are decoded with Pillow.
"""

from __future__ import annotations

import re
import stat
import warnings
from pathlib import Path

import numpy as np

from fedcluster.data.progress import progress
from fedcluster.data.sources.base import ArrayDataset, DatasetNotFoundError, images_to_float
from fedcluster.data.sources.idx import check_fits
from fedcluster.errors import DataFileError, UserError

FOLDER = "tiny-imagenet-200"
SIZE = 64
_HOW_TO_GET = ("download tiny-imagenet-200.zip from http://cs231n.stanford.edu/tiny-imagenet-200.zip, unzip it and "
               f"pass data_dir= the {FOLDER}/ folder or its parent")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+")  # a class id: never a path
_EXPECTED = ["wnids.txt", "train/<wnid>/images/*.JPEG", "val/images/*.JPEG", "val/val_annotations.txt"]


def locate(data_dir: str | Path) -> Path:
    root = Path(data_dir)
    candidates = [root, root / FOLDER]
    for folder in candidates:
        if (folder / "wnids.txt").is_file() and (folder / "train").is_dir() and (folder / "val").is_dir():
            return folder
    first = next((c for c in candidates if any((c / n).exists() for n in ("wnids.txt", "train", "val"))),
                 next((c for c in candidates if c.is_dir() and any(c.iterdir())), root))  # the copy, if any
    missing = [n for n in ("wnids.txt", "train", "val") if not (first / n).exists()]
    searched = [first, *(c for c in candidates if c != first)]
    raise DatasetNotFoundError("tiny-imagenet", searched, _EXPECTED, _HOW_TO_GET, missing)


def regular_file_inside(path: Path, folder: Path) -> Path:
    """``path`` itself, once it is known to be a regular file (a FIFO or device would block or never end) whose
    real location lies inside ``folder`` (links and ``..`` may not lead out of the data folder)."""
    try:
        real = path.resolve(strict=True)
        info = real.stat()
    except (OSError, RuntimeError):
        raise DataFileError(f"{path} is missing or cannot be read; the copy is incomplete: extract the archive "
                            "again") from None
    if not real.is_relative_to(folder.resolve()):
        raise DataFileError(f"{path} leads outside the data folder {folder} (to {real}); only files inside it are "
                            "read: extract the archive again")
    if not stat.S_ISREG(info.st_mode):
        raise DataFileError(f"{path} is not a regular file (a FIFO, device or folder); only image files are read: "
                            "extract the archive again")
    return path


def _lines(path: Path, folder: Path) -> list[str]:
    regular_file_inside(path, folder)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataFileError(f"{path} cannot be read as text ({type(e).__name__}); extract the archive again") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def read_image(path: Path) -> np.ndarray:
    """One 64×64 image as uint8 ``[64, 64, 3]`` (grey images converted to RGB)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if image.size != (SIZE, SIZE):  # refused before decoding (a small file may claim a huge size)
                    raise DataFileError(f"{path} is {image.size[0]}×{image.size[1]} pixels, not {SIZE}×{SIZE}: it "
                                        "is not a Tiny-ImageNet image")
                rgb = np.asarray(image.convert("RGB"))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise DataFileError(f"{path} claims more pixels than Pillow decodes safely, not {SIZE}×{SIZE} pixels: it is "
                            "not a Tiny-ImageNet image") from None
    except (OSError, UnidentifiedImageError, ValueError) as e:
        reason = " ".join(str(e).split())[:100] or type(e).__name__
        raise DataFileError(f"{path} is not a readable image ({reason}); extract the archive again") from None
    if rgb.shape != (SIZE, SIZE, 3):
        raise DataFileError(f"{path} is {rgb.shape[1]}×{rgb.shape[0]} pixels, not {SIZE}×{SIZE}: it is not a "
                            "Tiny-ImageNet image")
    return rgb


def _read_all(paths: list[Path], what: str) -> np.ndarray:
    check_fits(paths[0] if paths else Path(what), len(paths) * SIZE * SIZE * 3 * 5)  # uint8, then float32
    out = np.empty((len(paths), SIZE, SIZE, 3), dtype=np.uint8)
    for i, path in enumerate(progress(paths, len(paths), f"reading {what} images")):
        out[i] = read_image(path)
    return images_to_float(out.transpose(0, 3, 1, 2))


def load_tiny_imagenet(data_dir: str | Path) -> ArrayDataset:
    """Tiny-ImageNet: 100,000 train / 10,000 test (the labelled validation set) images ``[n, 3, 64, 64]`` in
    [0, 1], 200 classes."""
    try:
        import PIL  # noqa: F401 - a core dependency, but a trimmed environment may lack it
    except ImportError:
        raise UserError("Tiny-ImageNet's JPEG files are read with Pillow, which is not installed: "
                        "pip install pillow") from None
    folder = locate(data_dir)
    wnids = _lines(folder / "wnids.txt", folder)
    label = {w: i for i, w in enumerate(wnids)}
    if not wnids or len(label) != len(wnids):
        raise DataFileError(f"{folder / 'wnids.txt'} is empty or names a class twice; extract the archive again")
    if bad := next((w for w in wnids if not _PLAIN_NAME.fullmatch(w)), None):
        raise DataFileError(f"{folder / 'wnids.txt'} names {bad[:40]!r}, not a class id (letters and digits); "
                            "extract the archive again")
    train, y_train = [], []
    for wnid in wnids:
        images = [regular_file_inside(p, folder) for p in sorted((folder / "train" / wnid / "images").glob("*.JPEG"))]
        if not images:
            raise DataFileError(f"{folder / 'train' / wnid / 'images'} holds no .JPEG images; the copy is "
                                "incomplete: extract the archive again")
        train += images
        y_train += [label[wnid]] * len(images)
    annotations = folder / "val" / "val_annotations.txt"
    if not annotations.is_file():
        raise DataFileError(f"{annotations} is missing; the copy is incomplete: extract the archive again")
    test, y_test = [], []
    for n, line in enumerate(_lines(annotations, folder), start=1):
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in label:
            raise DataFileError(f"{annotations} line {n} is not 'FILE<tab>WNID<tab>box' with a class of "
                                "wnids.txt; extract the archive again")
        if Path(parts[0]).is_absolute() or ".." in Path(parts[0]).parts:
            raise DataFileError(f"{annotations} line {n} names {parts[0][:60]!r}, a path outside the data folder "
                                f"{folder}; only files of val/images are read: extract the archive again")
        test.append(regular_file_inside(folder / "val" / "images" / parts[0], folder))
        y_test.append(label[parts[1]])
    return ArrayDataset("tiny-imagenet", _read_all(train, "train"), np.array(y_train, dtype=np.int64),
                        _read_all(test, "validation"), np.array(y_test, dtype=np.int64), num_classes=len(wnids))
