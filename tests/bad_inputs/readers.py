"""Data files crafted against the readers: Tiny-ImageNet and FEMNIST/LEAF."""


import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bad_inputs.core import RUN, Case


def _tiny(d: Path, damage: Callable[[Path], None]) -> None:
    from PIL import Image

    folder = d / "tiny-imagenet-200"
    wnids = ["n01", "n02"]
    (folder / "val" / "images").mkdir(parents=True)
    (folder / "wnids.txt").write_text("\n".join(wnids) + "\n")
    lines = []
    for c, wnid in enumerate(wnids):
        (folder / "train" / wnid / "images").mkdir(parents=True)
        for j in range(3):
            Image.new("RGB", (64, 64), (40 * c, 9 * j, 0)).save(folder / "train" / wnid / "images" / f"{j}.JPEG")
        Image.new("RGB", (64, 64)).save(folder / "val" / "images" / f"v{c}.JPEG")
        lines.append(f"v{c}.JPEG\t{wnid}\t0\t0\t63\t63")
    (folder / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    damage(folder)


def _annotate(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        with (folder / "val" / "val_annotations.txt").open("a") as f:
            f.write(f"{name}\tn01\t0\t0\t63\t63\n")
    return damage


def _leaf(d: Path, pixel: Any = 0.5, stranger: bool = False) -> None:
    users = {f"w{i}": {"x": [[0.5] * 784 for _ in range(4)], "y": [i, i, i, i]} for i in range(4)}
    users["w0"]["x"][0][0] = pixel
    if stranger:
        train, test = {u: v for u, v in users.items() if u != "w3"}, {"w3": users["w3"]}
        for part, group in (("train", train), ("test", test)):
            (d / "leaf" / part).mkdir(parents=True)
            (d / "leaf" / part / "a.json").write_text(json.dumps({"users": list(group), "user_data": group}))
        return
    (d / "leaf" / "all_data").mkdir(parents=True)
    (d / "leaf" / "all_data" / "a.json").write_text(json.dumps({"users": list(users), "user_data": users}))


def reader_cases() -> list[Case]:
    from PIL import Image

    tiny = lambda d: [*RUN[:2], "dataset=tiny-imagenet", f"data_dir={d}", "scenario=iid", "num_clients=2",  # noqa: E731
                      "model=logistic", "rounds=1", "progress=false", f"out={d / 'r'}"]
    leaf = lambda d: ["run", "dataset=femnist", f"data_dir={d / 'leaf'}", "scenario=natural", "num_clients=2",  # noqa: E731
                      "scenario.min_samples=1", "model=logistic", "rounds=1", "progress=false", f"out={d / 'r'}"]
    damages = {
        "a 40 kB image claiming 20000x20000 pixels":
            lambda f: Image.new("1", (20000, 20000)).save(f / "train" / "n01" / "images" / "0.JPEG", "PNG"),
        "a FIFO among the images": lambda f: os.mkfifo(f / "train" / "n02" / "images" / "fifo.JPEG"),
        "a FIFO named in val_annotations.txt":
            lambda f: (os.mkfifo(f / "val" / "images" / "fifo.JPEG"), _annotate("fifo.JPEG")(f)),
        "an absolute annotation path": _annotate("/etc/hostname"),
        "a ../ annotation path": _annotate("../../train/n01/images/0.JPEG"),
        "a wnid that is a path": lambda f: (f / "wnids.txt").write_text("n01\n../../n02\n"),
    }
    cases = [Case("readers", f"Tiny-ImageNet: {name}", tiny, lambda d, h=h: _tiny(d, h)) for name, h in damages.items()]
    cases += [Case("readers", "FEMNIST: a pixel given as text", leaf, lambda d: _leaf(d, "0.5")),
              Case("readers", "FEMNIST: a pixel of 1e30", leaf, lambda d: _leaf(d, 1e30)),
              Case("readers", "FEMNIST: a test writer absent from training", leaf, lambda d: _leaf(d, stranger=True))]
    return cases
