"""State files (safetensors + JSON + SHA-256) and atomic writes."""

from __future__ import annotations

import errno
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import fedcluster.storage.atomic as atomic
from fedcluster.storage.atomic import StorageError, atomic_write, remove_stale_temporaries
from fedcluster.storage.state_file import StateFileError, load_state, persistable, save_state


@persistable
@dataclass
class Stats:
    count: np.ndarray
    name: str


@dataclass
class Unregistered:
    x: int


STATE = {
    "models": {"w": torch.randn(3, 4), "b": torch.zeros(0, 2), "scalar": torch.tensor(2.5, dtype=torch.float64)},
    "omega": np.eye(3)[[0, 2, 1]],
    "ids": np.arange(4, dtype=np.int32),
    "mask": np.array([True, False]),
    "big_endian": np.array([1.5, 2.5], dtype=">f4"),
    "round": 7, "gamma": 0.25, "nan": float("nan"), "inf": -float("inf"), "flag": True, "none": None,
    "np_scalar": np.float32(1.5), "np_int": np.int64(3),
    "pool": [1, (2, 3), [4.0, "x"]], 5: "int key", (1, 2): "tuple key",
    "stats": Stats(np.ones(2), "s"), "bf16": torch.ones(2, dtype=torch.bfloat16),
}


def _equal(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.cpu(), b.cpu())
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Stats):
        return _equal(a.count, b.count) and a.name == b.name
    if isinstance(a, float) and np.isnan(a):
        return np.isnan(b)
    return a == b


def test_round_trip_keeps_every_type_and_value(tmp_path: Path) -> None:
    save_state(tmp_path / "s", STATE, "checkpoint")
    back = load_state(tmp_path / "s", "checkpoint")
    assert _equal(back, STATE)
    back["models"]["w"].add_(1)  # loaded tensors are ordinary, writable tensors


def test_unknown_objects_are_refused_on_save(tmp_path: Path) -> None:
    for bad in (Unregistered(1), np.array(["a"], dtype=object), {1, 2}):
        with pytest.raises(TypeError):
            save_state(tmp_path / "s", {"x": bad}, "checkpoint")
    assert not (tmp_path / "s").exists()


def test_every_flipped_byte_is_detected(tmp_path: Path) -> None:
    save_state(tmp_path / "s", {"w": torch.arange(40, dtype=torch.float32), "meta": [1, 2]}, "checkpoint", "k")
    data = (tmp_path / "s").read_bytes()
    for i in range(0, len(data), 7):
        bad = bytearray(data)
        bad[i] ^= 0x04
        (tmp_path / "s").write_bytes(bytes(bad))
        with pytest.raises(StateFileError):
            load_state(tmp_path / "s", "checkpoint", "k")


def test_kind_and_key_must_match(tmp_path: Path) -> None:
    save_state(tmp_path / "s", [1], "federation", key="abc")
    assert load_state(tmp_path / "s", "federation", "abc") == [1]
    with pytest.raises(StateFileError, match="another configuration"):
        load_state(tmp_path / "s", "federation", "abd")
    with pytest.raises(StateFileError, match="not a checkpoint"):
        load_state(tmp_path / "s", "checkpoint")


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_pickles_are_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    torch.save({"x": _Payload(marker)}, tmp_path / "zip")
    (tmp_path / "raw").write_bytes(pickle.dumps({"x": _Payload(marker)}))
    for name in ("zip", "raw"):
        with pytest.raises(StateFileError, match="never unpickled"):
            load_state(tmp_path / name, "checkpoint")
    assert not marker.exists()


def test_atomic_write_leaves_the_old_file_and_no_temporary_on_failure(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(StorageError, match="No space left on device; free"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead, alive = tmp_path / ".f.999999999.tmp", tmp_path / f".g.{os.getpid()}.tmp"
    dead.write_bytes(b"x")
    alive.write_bytes(b"x")
    (tmp_path / "keep.tmp").write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path) == [dead]
    assert alive.exists() and (tmp_path / "keep.tmp").exists()
