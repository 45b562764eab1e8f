"""FEMNIST (LEAF's JSON files, writers as clients) and Tiny-ImageNet (its folder of JPEGs), read from small files
written here in the real formats; torchvision roots for the idx and CIFAR loaders."""

from __future__ import annotations

import gzip
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.data.scenarios.natural import NaturalParams, natural
from fedcluster.data.sources.base import DatasetNotFoundError
from fedcluster.data.sources.leaf import NUM_CLASSES, WriterDataset, load_femnist
from fedcluster.data.sources.tiny_imagenet import load_tiny_imagenet
from fedcluster.errors import DataFileError, UserError

# writer -> number of samples; every pixel of writer w's sample j is (w + 1) / 10 + j / 1000: samples identify it
WRITERS = {"f0001_41": 12, "f0002_07": 15, "f0003_11": 3, "f0004_20": 20, "f0005_33": 11}


def pixel(w: int, j: int) -> float:
    return (w + 1) / 10 + j / 1000


def leaf_users(writers: dict[str, int]) -> dict[str, dict]:
    return {name: {"x": [[pixel(w, j)] * 784 for j in range(n)], "y": [(w * 7 + j) % NUM_CLASSES for j in range(n)]}
            for w, (name, n) in enumerate(writers.items())}


def write_leaf(folder: Path, users: dict[str, dict], per_file: int = 2) -> None:
    """LEAF's layout: files of a few users each, {"users", "num_samples", "user_data"}."""
    folder.mkdir(parents=True)
    names = list(users)
    for i in range(0, len(names), per_file):
        part = names[i:i + per_file]
        doc = {"users": part, "num_samples": [len(users[u]["y"]) for u in part],
               "user_data": {u: users[u] for u in part}}
        (folder / f"all_data_{i // per_file}.json").write_text(json.dumps(doc))


@pytest.fixture
def femnist_dir(tmp_path: Path) -> Path:
    write_leaf(tmp_path / "femnist" / "data" / "all_data", leaf_users(WRITERS))
    return tmp_path / "femnist"


def writer_of(x: np.ndarray) -> int:
    """The writer whose pixels these are (see ``pixel``)."""
    return int(np.floor(float(x.flat[0]) * 10 + 1e-4)) - 1


def test_femnist_all_data_keeps_every_sample_with_its_writer(femnist_dir: Path) -> None:
    data = load_femnist(femnist_dir)
    assert isinstance(data, WriterDataset) and data.num_classes == 62 and data.input_shape == (1, 28, 28)
    assert data.writers == sorted(WRITERS)
    assert len(data.y_train) + len(data.y_test) == sum(WRITERS.values())
    for split in ("train", "test"):
        x, owner = getattr(data, f"x_{split}"), getattr(data, f"{split}_writer")
        assert [writer_of(xi) for xi in x] == [list(WRITERS).index(data.writers[o]) for o in owner]
    held = np.bincount(data.test_writer, minlength=len(WRITERS))
    assert list(held) == [max(1, round(0.1 * WRITERS[u])) for u in data.writers]  # LEAF's 10% sample split
    again = load_femnist(femnist_dir)  # the held-out samples are fixed, not drawn per run
    assert np.array_equal(again.y_test, data.y_test) and np.array_equal(again.x_test, data.x_test)


def test_femnist_uses_leafs_own_train_test_split(tmp_path: Path) -> None:
    users = leaf_users(WRITERS)
    train = {u: {"x": d["x"][:-2], "y": d["y"][:-2]} for u, d in users.items()}
    test = {u: {"x": d["x"][-2:], "y": d["y"][-2:]} for u, d in users.items()}
    write_leaf(tmp_path / "train", train)
    write_leaf(tmp_path / "test", test)
    data = load_femnist(tmp_path)
    assert len(data.y_test) == 2 * len(WRITERS) and len(data.y_train) == sum(WRITERS.values()) - 2 * len(WRITERS)
    first = data.writers.index("f0001_41")
    assert np.array_equal(data.y_test[data.test_writer == first], users["f0001_41"]["y"][-2:])


def test_natural_scenario_keeps_writers_as_clients(femnist_dir: Path) -> None:
    data = load_femnist(femnist_dir)
    fed = natural(data, 3, NaturalParams(min_samples=8), np.random.default_rng(0))
    assert fed.num_clients == 3 and len(set(fed.info["writers"])) == 3
    assert "f0003_11" not in fed.info["writers"]  # 3 samples < min_samples
    train_sizes = np.bincount(data.train_writer, minlength=len(data.writers))
    for i, name in enumerate(fed.info["writers"]):
        samples = np.concatenate([fed.train.client(i)[0].numpy(), fed.val.client(i)[0].numpy()])
        assert {writer_of(x) for x in samples} == {list(WRITERS).index(name)}  # one writer, all of it
        assert len(samples) == train_sizes[data.writers.index(name)]
    test_writers = {writer_of(x) for x in fed.test.x.numpy()}
    assert test_writers == {list(WRITERS).index(n) for n in fed.info["writers"]}


def test_natural_concepts_map_labels_per_group_of_writers(femnist_dir: Path) -> None:
    data = load_femnist(femnist_dir)
    fed = natural(data, 4, NaturalParams(concepts=2), np.random.default_rng(0))
    assert sorted(np.bincount(fed.true_cluster)) == [2, 2] and fed.test.num_clients == 2
    maps = fed.extras["label_maps"]
    for i, name in enumerate(fed.info["writers"]):
        rows = np.flatnonzero(data.train_writer == data.writers.index(name))
        expected = np.sort(maps[fed.true_cluster[i]][data.y_train[rows]])
        got = np.sort(np.concatenate([fed.train.client(i)[1].numpy(), fed.val.client(i)[1].numpy()]))
        assert np.array_equal(got, expected)


def test_natural_refuses_too_many_clients_and_a_data_set_without_writers(femnist_dir: Path) -> None:
    data = load_femnist(femnist_dir)
    with pytest.raises(ValueError, match="only 4 writers"):
        natural(data, 5, NaturalParams(), np.random.default_rng(0))
    assert main(["run", "scenario=natural", "rounds=1", "progress=false"]) == 2


def test_femnist_natural_run_end_to_end(femnist_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["run", "dataset=femnist", f"data_dir={femnist_dir}", "scenario=natural", "num_clients=4",
                 "scenario.min_samples=5", "model=mlp", "rounds=2", "progress=false", "algorithm=fedavg",
                 f"out={out}"]) == 0
    assert (out / "summary.json").is_file() and "natural: 4 clients" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["missing", "not-json", "no-users", "short-rows", "bad-label"])
def test_a_missing_or_garbled_femnist_folder_is_one_line(damage: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "all_data"
    if damage != "missing":
        write_leaf(folder, leaf_users(WRITERS))
        target = folder / "all_data_0.json"
        doc = json.loads(target.read_text())
        if damage == "not-json":
            target.write_text(target.read_text()[:100])
        elif damage == "no-users":
            target.write_text(json.dumps({"user_data": doc["user_data"]}))
        elif damage == "short-rows":
            doc["user_data"]["f0001_41"]["x"][0] = [0.5] * 700
            target.write_text(json.dumps(doc))
        else:
            doc["user_data"]["f0001_41"]["y"][0] = 62
            target.write_text(json.dumps(doc))
    with pytest.raises((DataFileError, DatasetNotFoundError)):
        load_femnist(tmp_path)
    assert main(["run", "dataset=femnist", f"data_dir={tmp_path}", "rounds=1", "progress=false",
                 f"out={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len([line for line in err.splitlines() if "error" in line]) == 1


# -- Tiny-ImageNet -----------------------------------------------------------------------------------------------
WNIDS = ["n01443537", "n01629819", "n01641577"]


def colour(c: int, j: int) -> tuple[int, int, int]:
    return (40 + 80 * c, 200 - 10 * j, 30 + 60 * c)


def write_tiny_imagenet(root: Path, train_per_class: int = 3, val_per_class: int = 2) -> Path:
    """tiny-imagenet-200/: wnids.txt, train/<wnid>/images/*.JPEG (+ boxes), val/images + val_annotations.txt."""
    from PIL import Image

    folder = root / "tiny-imagenet-200"
    (folder / "val" / "images").mkdir(parents=True)
    (folder / "wnids.txt").write_text("\n".join(WNIDS) + "\n")
    (folder / "words.txt").write_text("".join(f"{w}\tthing {i}\n" for i, w in enumerate(WNIDS)))
    lines = []
    for c, wnid in enumerate(WNIDS):
        images = folder / "train" / wnid / "images"
        images.mkdir(parents=True)
        for j in range(train_per_class):
            Image.new("RGB", (64, 64), colour(c, j)).save(images / f"{wnid}_{j}.JPEG", "JPEG", quality=95)
        (folder / "train" / wnid / f"{wnid}_boxes.txt").write_text("")
        for j in range(val_per_class):
            name = f"val_{c * val_per_class + j}.JPEG"
            mode = "L" if j == 1 else "RGB"  # a few Tiny-ImageNet images are stored grey
            Image.new(mode, (64, 64), 128 if mode == "L" else colour(c, j)).save(folder / "val" / "images" / name,
                                                                                 "JPEG", quality=95)
            lines.append(f"{name}\t{wnid}\t0\t0\t63\t63")
    (folder / "val" / "val_annotations.txt").write_text("\n".join(reversed(lines)) + "\n")
    (folder / "test" / "images").mkdir(parents=True)
    return folder


@pytest.mark.parametrize("give_parent", [True, False])
def test_tiny_imagenet_reads_the_folder_layout(give_parent: bool, tmp_path: Path) -> None:
    folder = write_tiny_imagenet(tmp_path)
    data = load_tiny_imagenet(tmp_path if give_parent else folder)
    assert data.num_classes == 3 and data.input_shape == (3, 64, 64)
    assert list(data.y_train) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    for i, y in enumerate(data.y_train):
        expected = np.array(colour(int(y), i % 3), dtype=np.float32) / 255
        assert np.allclose(data.x_train[i].mean(axis=(1, 2)), expected, atol=0.03)  # JPEG is lossy
    assert sorted(data.y_test) == [0, 0, 1, 1, 2, 2] and list(data.y_test) == [2, 2, 1, 1, 0, 0]
    grey = data.x_test[0]  # val_5.JPEG (listed first), stored grey: three equal channels
    assert np.allclose(grey, 128 / 255, atol=0.02)


def test_tiny_imagenet_run_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    write_tiny_imagenet(tmp_path, train_per_class=6)
    out = tmp_path / "run"
    assert main(["run", "dataset=tiny-imagenet", f"data_dir={tmp_path}", "scenario=iid", "num_clients=3",
                 "model=logistic", "rounds=1", "progress=false", f"out={out}"]) == 0
    assert (out / "summary.json").is_file()


@pytest.mark.parametrize("damage", ["missing", "no-annotations", "bad-jpeg", "wrong-size", "unknown-wnid"])
def test_a_missing_or_garbled_tiny_imagenet_is_one_line(damage: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from PIL import Image

    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    if damage != "missing":
        folder = write_tiny_imagenet(tmp_path)
        annotations = folder / "val" / "val_annotations.txt"
        first = folder / "train" / WNIDS[0] / "images" / f"{WNIDS[0]}_0.JPEG"
        if damage == "no-annotations":
            annotations.unlink()
        elif damage == "bad-jpeg":
            first.write_bytes(first.read_bytes()[:50])
        elif damage == "wrong-size":
            Image.new("RGB", (32, 32)).save(first, "JPEG")
        else:
            annotations.write_text("val_0.JPEG\tn99999999\t0\t0\t1\t1\n")
    with pytest.raises((DataFileError, DatasetNotFoundError)):
        load_tiny_imagenet(tmp_path)
    assert main(["run", "dataset=tiny-imagenet", f"data_dir={tmp_path}", "scenario=iid", "rounds=1",
                 "progress=false", f"out={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len([line for line in err.splitlines() if "error" in line]) == 1


def test_tiny_imagenet_without_pillow_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tiny_imagenet(tmp_path)
    monkeypatch.setitem(sys.modules, "PIL", None)  # as if not installed
    with pytest.raises(UserError, match="pip install pillow"):
        load_tiny_imagenet(tmp_path)


# -- torchvision roots ---------------------------------------------------------------------------------------------
def _idx(path: Path, array: np.ndarray, gz: bool) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(data) if gz else data)


def test_a_torchvision_root_serves_mnist_emnist_fashion_and_cifar(tmp_path: Path) -> None:
    """torchvision's download=True layout: ROOT/MNIST/raw (idx files, plain and .gz), ROOT/EMNIST/raw (plain),
    ROOT/FashionMNIST/raw and ROOT/cifar-10-batches-py; data_dir=ROOT serves every one."""
    import pickle

    from fedcluster.data.sources.cifar import load_cifar10
    from fedcluster.data.sources.fashion_mnist import load_fashion_mnist
    from fedcluster.data.sources.mnist import load_emnist, load_mnist

    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (6, 28, 28)), np.arange(6) % 10
    layouts = {"MNIST": ("", True), "EMNIST": ("emnist-balanced-", False), "FashionMNIST": ("", True)}
    for folder, (prefix, both) in layouts.items():
        raw = tmp_path / folder / "raw"
        raw.mkdir(parents=True)
        for split in ("train", "t10k" if not prefix else "test"):
            stem = f"{prefix}{split}"
            for gz in ((False, True) if both else (False,)):
                suffix = ".gz" if gz else ""
                _idx(raw / f"{stem}-images-idx3-ubyte{suffix}", images, gz)
                _idx(raw / f"{stem}-labels-idx1-ubyte{suffix}", labels, gz)
    cifar = tmp_path / "cifar-10-batches-py"
    cifar.mkdir()
    for name in (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"):
        batch = {b"data": rng.integers(0, 256, (4, 3072)).astype(np.uint8), b"labels": [0, 1, 2, 3]}
        (cifar / name).write_bytes(pickle.dumps(batch, protocol=2))
    mnist, emnist, fashion = load_mnist(tmp_path), load_emnist(tmp_path), load_fashion_mnist(tmp_path)
    assert len(mnist.y_train) == len(emnist.y_test) == len(fashion.y_train) == 6
    assert np.allclose(mnist.x_train[:, 0], images / 255, atol=1e-6)
    assert np.allclose(emnist.x_train[:, 0], images.transpose(0, 2, 1) / 255, atol=1e-6)  # stored transposed
    assert len(load_cifar10(tmp_path).y_train) == 20


def test_a_cached_femnist_federation_whose_labels_miss_classes_is_served(femnist_dir: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A few writers' labels need not reach all 62 classes: the cache serves their federation, never rebuilds it."""
    import io
    from contextlib import redirect_stderr

    import fedcluster
    from fedcluster.data import build

    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    config = {"dataset": "femnist", "data_dir": str(femnist_dir), "scenario": "natural", "num_clients": 4,
              "scenario.min_samples": 1}
    first = fedcluster.build_federation(config)
    assert int(first.train.y.max()) + 1 < first.num_classes == 62
    monkeypatch.setattr(build, "_store", lambda *args: pytest.fail("built again"))
    err = io.StringIO()
    with redirect_stderr(err):
        again = fedcluster.build_federation(config)
    assert "discarding" not in err.getvalue() and again.num_classes == 62
    assert torch.equal(again.train.y, first.train.y)
