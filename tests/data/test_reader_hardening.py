"""The Tiny-ImageNet and FEMNIST readers on files nobody should have to trust: an image claiming a huge size, a FIFO
among the images or named by the annotations, annotation paths leading out of the data folder, pixels that are
text or out of range, test writers absent from training. Each is one line, exit 2; nothing hangs."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.data.sources.leaf import load_femnist
from fedcluster.data.sources.tiny_imagenet import load_tiny_imagenet
from fedcluster.errors import DataFileError
from tests.data.test_natural_data import WNIDS, WRITERS, leaf_users, write_leaf, write_tiny_imagenet


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (a blocked open of a FIFO is interrupted by the alarm)."""
    def expire(*_: object) -> None:
        raise TimeoutError("the reader hung")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _bomb(folder: Path) -> str:
    """A small PNG that claims 20000×20000 pixels, in place of a training image."""
    from PIL import Image

    target = folder / "train" / WNIDS[0] / "images" / f"{WNIDS[0]}_0.JPEG"
    Image.new("1", (20000, 20000)).save(target, "PNG")
    return "pixels"


def _fifo_among_images(folder: Path) -> str:
    os.mkfifo(folder / "train" / WNIDS[1] / "images" / "zz_fifo.JPEG")
    return "not a regular file"


def _fifo_in_annotations(folder: Path) -> str:
    os.mkfifo(folder / "val" / "images" / "fifo.JPEG")
    with (folder / "val" / "val_annotations.txt").open("a") as f:
        f.write(f"fifo.JPEG\t{WNIDS[0]}\t0\t0\t63\t63\n")
    return "not a regular file"


def _outside(folder: Path, name: str) -> str:
    with (folder / "val" / "val_annotations.txt").open("a") as f:
        f.write(f"{name}\t{WNIDS[0]}\t0\t0\t63\t63\n")
    return "outside"


def _absolute(folder: Path) -> str:
    image = folder / "train" / WNIDS[0] / "images" / f"{WNIDS[0]}_1.JPEG"
    elsewhere = folder.parent / "elsewhere.JPEG"
    elsewhere.write_bytes(image.read_bytes())
    return _outside(folder, str(elsewhere))


def _dotdot(folder: Path) -> str:
    return _outside(folder, f"../../train/{WNIDS[0]}/images/{WNIDS[0]}_1.JPEG")


def _link_out(folder: Path) -> str:
    image = folder / "train" / WNIDS[0] / "images" / f"{WNIDS[0]}_1.JPEG"
    elsewhere = folder.parent / "elsewhere.JPEG"
    elsewhere.write_bytes(image.read_bytes())
    (folder / "train" / WNIDS[0] / "images" / "zz_link.JPEG").symlink_to(elsewhere)
    return "outside"


def _wnid_path(folder: Path) -> str:
    (folder / "wnids.txt").write_text("\n".join([*WNIDS, "../../x"]) + "\n")
    return "wnids.txt"


TINY: dict[str, Callable[[Path], str]] = {
    "decompression bomb": _bomb, "fifo among the images": _fifo_among_images,
    "fifo in val_annotations.txt": _fifo_in_annotations, "absolute annotation path": _absolute,
    "../ annotation path": _dotdot, "image linked from outside": _link_out, "wnid with a path": _wnid_path,
}


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with deadline(60):
        rc = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("fedcluster:")
           and "note:" not in ln]
    assert rc == 2 and len(err) == 1 and "error" in err[0], (rc, err)
    return err[0]


@pytest.mark.parametrize("case", list(TINY))
def test_tiny_imagenet_refuses_what_it_must_not_open(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    folder = write_tiny_imagenet(tmp_path / "data")
    needle = TINY[case](folder)
    with deadline(60), pytest.raises(DataFileError, match=needle):
        load_tiny_imagenet(folder)
    line = _one_line(["run", "dataset=tiny-imagenet", f"data_dir={folder}", "scenario=iid", "num_clients=3",
                      "model=logistic", "rounds=1", "progress=false", f"out={tmp_path / 'r'}"], capsys)
    assert needle in line


def _leaf_case(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def write(root: Path) -> None:
        users = leaf_users(WRITERS)
        change(users)
        write_leaf(root / "all_data", users)
    return write


def _split_with_stranger(root: Path) -> None:
    users = leaf_users(WRITERS)
    write_leaf(root / "train", {u: v for u, v in users.items() if u != "f0005_33"})
    write_leaf(root / "test", {"f0005_33": users["f0005_33"]})


LEAF: dict[str, tuple[Callable[[Path], None], str]] = {
    "pixels as text": (_leaf_case(lambda u: u["f0001_41"]["x"][0].__setitem__(3, "0.5")), "not numbers"),
    "pixel 1e30": (_leaf_case(lambda u: u["f0002_07"]["x"][1].__setitem__(0, 1e30)), "outside [0, 1]"),
    "pixel -2": (_leaf_case(lambda u: u["f0002_07"]["x"][1].__setitem__(0, -2)), "outside [0, 1]"),
    "test writer absent from training": (_split_with_stranger, "f0005_33"),
    "one pixel true": (_leaf_case(lambda u: u["f0001_41"]["x"][0].__setitem__(5, True)), "among its pixel"),
    "one pixel false": (_leaf_case(lambda u: u["f0002_07"]["x"][1].__setitem__(0, False)), "among its pixel"),
    "one label true": (_leaf_case(lambda u: u["f0002_07"]["y"].__setitem__(0, True)), "true/false among its labels"),
}


@pytest.mark.parametrize("case", list(LEAF))
def test_femnist_refuses_bad_pixels_and_test_only_writers(case: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))
    write, needle = LEAF[case]
    write(tmp_path / "data")
    with pytest.raises(DataFileError, match=re.escape(needle)):
        load_femnist(tmp_path / "data")
    out = tmp_path / "r"
    line = _one_line(["run", "dataset=femnist", f"data_dir={tmp_path / 'data'}", "scenario=natural",
                      "num_clients=3", "scenario.min_samples=1", "model=logistic", "rounds=1", "progress=false",
                      f"out={out}"], capsys)
    assert needle in line and not (out / "summary.json").exists()


def test_femnist_with_a_writer_named_true_still_reads(tmp_path: Path) -> None:
    users = leaf_users(WRITERS)
    users["true false"] = users.pop(next(iter(users)))  # the words in a name (a string), not JSON's true/false
    write_leaf(tmp_path / "all_data", users)
    assert "true false" in load_femnist(tmp_path).writers


def test_femnist_with_leafs_split_still_reads(tmp_path: Path) -> None:
    users = leaf_users(WRITERS)
    write_leaf(tmp_path / "train", users)
    write_leaf(tmp_path / "test", {u: {"x": v["x"][:1], "y": v["y"][:1]} for u, v in users.items()})
    data = load_femnist(tmp_path)
    assert len(data.writers) == len(WRITERS) and len(data.y_test) == len(WRITERS)
    assert json.dumps(data.writers)
