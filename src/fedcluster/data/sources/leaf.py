"""FEMNIST (Caldas et al., LEAF, 2018) from LEAF's JSON files: handwritten characters grouped by writer.

LEAF's ``preprocess.sh`` writes ``all_data/*.json``; with a train/test split (``-t sample``) also ``train/*.json``
and ``test/*.json``. Every file is one object ``{"users": [...], "num_samples": [...], "user_data": {user: {"x":
[[784 floats in [0, 1]], ...], "y": [class, ...]}}}``; the 62 classes are the digits, then upper- and lower-case
letters. The writers are a natural partition: ``scenario=natural`` keeps them as the clients (other scenarios
pool the images and partition them like any data set).

The test split is LEAF's own when ``train/`` and ``test/`` are there (the same writers in both); from
``all_data/`` alone, 10% of each writer's samples (at least one when it has two) are held out for testing,
drawn with a fixed seed, LEAF's ``-t sample`` split. Files are read one at a time, so a folder holding a few of
LEAF's files is a smaller FEMNIST.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedcluster.data.sources.base import ArrayDataset, DatasetNotFoundError
from fedcluster.errors import DataFileError

NUM_CLASSES = 62
PIXELS = 28 * 28
TEST_SHARE = 0.1  # LEAF's default train fraction is 0.9
_HOW_TO_GET = ("clone https://github.com/TalwalkarLab/leaf, run `./preprocess.sh -s niid --sf 1.0 -k 0 -t sample` in "
               "data/femnist, and pass data_dir= the data/femnist/data folder (which holds all_data/, or train/ and "
               "test/)")


@dataclass(repr=False)
class WriterDataset(ArrayDataset):
    """An image data set whose samples come from named writers: ``train_writer[i]`` / ``test_writer[i]`` index
    ``writers`` (the natural clients)."""

    writers: list[str] = field(default_factory=list)
    train_writer: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    test_writer: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _json_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json") if p.is_file()) if folder.is_dir() else []


def locate(data_dir: str | Path) -> tuple[Path, Path | None]:
    """``(train_folder, test_folder)``: LEAF's split when present, else ``(all_data, None)``."""
    root = Path(data_dir)
    bases = [root, root / "data", root / "femnist" / "data"]
    for base in bases:
        if _json_files(base / "train") and _json_files(base / "test"):
            return base / "train", base / "test"
        if _json_files(base / "all_data"):
            return base / "all_data", None
    raise DatasetNotFoundError("femnist", bases, ["all_data/*.json  (or train/*.json and test/*.json)"], _HOW_TO_GET)


def read_leaf_file(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``user -> (x [n, 784] float32, y [n] int64)`` of one LEAF JSON file, checked."""
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError) as e:
        reason = " ".join(str(e).split())[:100] or type(e).__name__
        raise DataFileError(f"{path} is not readable LEAF JSON ({reason}); it is truncated or corrupt: run LEAF's "
                            "preprocessing again") from None
    users = data.get("users") if isinstance(data, dict) else None
    user_data = data.get("user_data") if isinstance(data, dict) else None
    if not isinstance(users, list) or not isinstance(user_data, dict):
        raise DataFileError(f"{path} has no 'users' list and 'user_data' object: it is not a LEAF data file")
    out = {}
    may_hold_booleans = re.search(rb"\b(true|false)\b", raw) is not None  # else no true/false anywhere: no walk
    for user in users:
        entry = user_data.get(user) if isinstance(user, str) else None
        if not isinstance(entry, dict):
            raise DataFileError(f"{path}: user {user!r} is listed but has no user_data entry; the file is corrupt")
        if may_hold_booleans and (where := _boolean_in(entry)) is not None:
            raise DataFileError(f"{path}: user {user!r} has true/false among its {where} (LEAF writes numbers); the "
                                "file is corrupt: run LEAF's preprocessing again")
        try:
            x = np.asarray(entry.get("x"))  # no dtype: text or true/false stay visible as such
            y = np.asarray(entry.get("y"))
        except (TypeError, ValueError):
            raise DataFileError(f"{path}: user {user!r} has x or y that are not lists of numbers") from None
        if x.size and x.dtype.kind not in "iuf":
            raise DataFileError(f"{path}: user {user!r} has pixel values that are not numbers (LEAF writes numbers "
                                "in [0, 1]); the file is corrupt")
        if x.ndim != 2 or x.shape[1] != PIXELS or y.ndim != 1 or len(y) != len(x):
            raise DataFileError(f"{path}: user {user!r} has x of shape {x.shape} and y of shape {y.shape}; FEMNIST "
                                f"needs one row of {PIXELS} pixels per label")
        if y.dtype.kind not in "iu" or (len(y) and (y.min() < 0 or y.max() >= NUM_CLASSES)):
            raise DataFileError(f"{path}: user {user!r} has labels outside 0..{NUM_CLASSES - 1}; the file is corrupt")
        if not np.isfinite(x).all():
            raise DataFileError(f"{path}: user {user!r} has pixel values that are not finite; the file is corrupt")
        if x.size and (x.min() < 0 or x.max() > 1):
            raise DataFileError(f"{path}: user {user!r} has pixel values outside [0, 1] (from {x.min():.3g} to "
                                f"{x.max():.3g}); LEAF scales pixels to [0, 1]: the file is corrupt")
        out[user] = (x.astype(np.float32), y.astype(np.int64))
    return out


def _boolean_in(entry: dict[str, Any]) -> str | None:
    """Which of a user's lists (pixels ``x``, labels ``y``) holds a JSON true/false (NumPy would read it as 1 or
    0 among numbers); None when neither does."""
    def has_boolean(value: Any) -> bool:
        if isinstance(value, bool):
            return True
        return isinstance(value, list) and any(has_boolean(v) for v in value)

    for key, what in (("x", "pixel values"), ("y", "labels")):
        if has_boolean(entry.get(key)):
            return what
    return None


def _read_folder(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    users: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for path in _json_files(folder):
        for user, (x, y) in read_leaf_file(path).items():
            if user in users:  # LEAF splits no writer over files; joined if a copy does
                x, y = np.concatenate([users[user][0], x]), np.concatenate([users[user][1], y])
            users[user] = (x, y)
    return users


def _hold_out(users: dict[str, tuple[np.ndarray, np.ndarray]]
              ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """LEAF's sample split: ``TEST_SHARE`` of each writer's samples (>= 1 of >= 2) held out, fixed seed."""
    rng = np.random.default_rng(0)
    train, test = {}, {}
    for user in sorted(users):
        x, y = users[user]
        n_test = max(1, round(TEST_SHARE * len(y))) if len(y) >= 2 else 0
        perm = rng.permutation(len(y))
        keep, held = np.sort(perm[n_test:]), np.sort(perm[:n_test])
        train[user], test[user] = (x[keep], y[keep]), (x[held], y[held])
    return train, test


def _stack(users: dict[str, tuple[np.ndarray, np.ndarray]], index: dict[str, int]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    names = [u for u in index if u in users]
    xs = [users[u][0] for u in names] or [np.zeros((0, PIXELS), np.float32)]
    ys = [users[u][1] for u in names] or [np.zeros(0, np.int64)]
    owner = np.concatenate([np.full(len(users[u][1]), index[u], dtype=np.int64) for u in names] or
                           [np.zeros(0, np.int64)])
    return np.concatenate(xs).reshape(-1, 1, 28, 28), np.concatenate(ys), owner


def load_femnist(data_dir: str | Path) -> WriterDataset:
    """FEMNIST: images ``[n, 1, 28, 28]`` in [0, 1] (LEAF's scaling: white background 1), 62 classes, with the
    writer of every sample."""
    train_folder, test_folder = locate(data_dir)
    train = _read_folder(train_folder)
    test = _read_folder(test_folder) if test_folder is not None else None
    if test is None:
        train, test = _hold_out(train)
    if not any(len(y) for _, y in train.values()):
        raise DataFileError(f"{train_folder} holds no samples; pass data_dir= a folder of LEAF's FEMNIST files")
    index = {u: i for i, u in enumerate(sorted(train))}
    strangers = sorted(u for u, (_, y) in test.items() if len(y) and u not in index)
    if strangers:
        raise DataFileError(f"{test_folder} holds test samples of {len(strangers)} writers absent from {train_folder} "
                            f"({', '.join(strangers[:3])}{', ...' if len(strangers) > 3 else ''}); FEMNIST's clients "
                            "are its writers, so each test writer must also train: make LEAF's split with "
                            "`-t sample`, or pass all_data/ alone")
    if not any(len(y) for _, y in test.values()):
        raise DataFileError(f"{test_folder or train_folder} leaves no test samples; pass data_dir= a folder of "
                            "LEAF's FEMNIST files with writers of two samples or more")
    x_train, y_train, w_train = _stack(train, index)
    x_test, y_test, w_test = _stack(test, index)
    return WriterDataset("femnist", x_train, y_train, x_test, y_test, NUM_CLASSES, writers=list(index),
                         train_writer=w_train, test_writer=w_test)
