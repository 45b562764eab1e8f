"""The federation cache is keyed by the data read, not by the typed ``data_dir``: another folder under the same
relative path, or a folder whose files changed, is read afresh."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import fedcluster
from fedcluster.data.sources.base import DatasetNotFoundError
from tests.data.test_sources import MNIST_NAMES, write_mnist_layout


def _federation(data_dir: str, clients: int = 2) -> fedcluster.Federation:
    return fedcluster.build_federation({"dataset": "mnist", "data_dir": data_dir, "scenario": "iid",
                                        "num_clients": clients, "seed": 3})


def _labels(fed: fedcluster.Federation) -> set[int]:
    return {int(v) for v in np.asarray(fed.train.y.cpu())} | {int(v) for v in np.asarray(fed.test.y.cpu())}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_same_relative_data_dir_in_two_folders_reads_each_folders_data(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write_mnist_layout(first / "data", MNIST_NAMES, gz=False, n_train=40, n_test=10, labels=(0, 10))
    write_mnist_layout(second / "data", MNIST_NAMES, gz=False, n_train=40, n_test=10, labels=(0, 3))
    monkeypatch.chdir(first)
    wide = _federation("data")
    monkeypatch.chdir(second)
    narrow = _federation("data")
    assert max(_labels(wide)) > 2 and _labels(narrow) <= {0, 1, 2}
    assert len(list((cache / "federations").glob("*.safetensors"))) == 2


def test_a_changed_file_is_read_afresh(tmp_path: Path, cache: Path) -> None:
    folder = tmp_path / "data"
    write_mnist_layout(folder, MNIST_NAMES, gz=False, n_train=40, n_test=10, labels=(0, 10))
    before = _federation(str(folder))
    labels = folder / MNIST_NAMES[1]
    raw = bytearray(labels.read_bytes())
    raw[8:] = bytes(len(raw) - 8)  # every training label 0, same size
    labels.write_bytes(bytes(raw))
    os.utime(labels, ns=(labels.stat().st_atime_ns, labels.stat().st_mtime_ns + 10**9))
    after = _federation(str(folder))
    assert set(np.asarray(after.train.y.cpu()).tolist()) == {0} != set(np.asarray(before.train.y.cpu()).tolist())


def test_a_removed_file_is_read_afresh_and_missed(tmp_path: Path, cache: Path) -> None:
    folder = tmp_path / "data"
    write_mnist_layout(folder, MNIST_NAMES, gz=False, n_train=40, n_test=10)
    _federation(str(folder))
    (folder / MNIST_NAMES[2]).unlink()
    with pytest.raises(DatasetNotFoundError):
        _federation(str(folder))


def test_an_unchanged_folder_is_served_from_the_cache(tmp_path: Path, cache: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "data"
    write_mnist_layout(folder, MNIST_NAMES, gz=False, n_train=40, n_test=10)
    _federation(str(folder))
    import fedcluster.data.build as build

    monkeypatch.setattr(build, "_store", lambda *args: pytest.fail("built again"))
    monkeypatch.chdir(tmp_path)
    _federation("data")  # the same folder typed another way: the same key


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_cache_variable_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str], value: str) -> None:
    from fedcluster.app.cli import main

    monkeypatch.setenv("FEDCLUSTER_CACHE", value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["run", "num_clients=4", "rounds=1", "progress=false", f"out={tmp_path / 'r'}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "FEDCLUSTER_CACHE is set but empty" in lines[0], lines
    assert not (tmp_path / "federations").exists() and not (tmp_path / "home").exists()
