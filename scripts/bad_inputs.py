"""Try a generated set of bad inputs against the CLI and the library in-process; count the outcomes.

    PYTHONPATH=src python scripts/bad_inputs.py [--only FAMILY] [--show]

Every case is an argv for ``fedcluster.app.cli.main`` (or a library call) after an optional setup that plants
files (a damaged run directory, a crafted checkpoint, a data file). Outcomes:

* clean: what the case expects — exit 2 with one ``fedcluster: error:`` line (a bad input), or exit 0 with
  the check passing (an input that is fine, e.g. ``np.int64`` values, ``scenario --out FOLDER``);
* traceback: an exception escaped ``main``;
* silent: exit 0 where a refusal was due, or a wrong result;
* hang: still running after ``--case-seconds`` (default 120);
* other: another exit status, or more than one error line.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedcluster.app.cli import main

RUN = ["run", "num_clients=4", "rounds=1", "progress=false"]
MNIST = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
         "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


@dataclass
class Case:
    family: str
    name: str
    argv: Callable[[Path], list[str]] | None = None  # built inside the case's folder
    setup: Callable[[Path], None] | None = None
    expect: str = "refuse"  # refuse | ok | either (a refusal or the check passing)
    check: Callable[[Path, str], bool] | None = None  # for ok/either: (folder, stdout+stderr) -> passed
    call: Callable[[Path], Any] | None = None  # a library call instead of argv
    tags: list[str] = field(default_factory=list)


# -- a finished run to damage ----------------------------------------------------------------------------
BASE: dict[str, Path] = {}


def base_run(root: Path, algorithm: str = "ifca") -> Path:
    if algorithm not in BASE:
        out = root / f"base-{algorithm}"
        _quiet(["run", f"algorithm={algorithm}", "num_clients=6", "rounds=2", "progress=false", f"out={out}"])
        BASE[algorithm] = out
    return BASE[algorithm]


def _quiet(argv: list[str]) -> int:
    with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        return main(argv)


def copy_run(root: Path, d: Path, algorithm: str = "ifca") -> Path:
    run = d / "run"
    shutil.copytree(base_run(root, algorithm), run)
    for lock in run.glob("*.lock"):
        lock.unlink()
    return run


def plant(d: Path, name: str, data: bytes | None) -> None:
    """Replace ``run/name`` with ``data`` (None: a directory)."""
    p = d / "run" / name
    p.unlink(missing_ok=True)
    if data is None:
        p.mkdir()
    else:
        p.write_bytes(data)


def edit_checkpoint(d: Path, change: Callable[[dict[str, Any]], None]) -> None:
    from fedcluster.storage.state_file import load_state, save_state

    path = d / "run" / "checkpoint.pt"
    state = load_state(path, "checkpoint")
    change(state)
    save_state(path, state, "checkpoint")  # a valid checksum over a wrong structure


def deep_json(n: int) -> bytes:
    return ("[" * n + "]" * n).encode()


ROUNDS_BAD = {
    "text in a numeric column": lambda t: t.replace("\n1,", "\n1,abc,", 1),
    "missing round column": lambda t: "\n".join(",".join(c for c in line.split(",")[1:]) for line in t.split("\n")),
    "short row": lambda t: t + "3,0.5\n",
    "header only": lambda t: t.split("\n")[0] + "\n",
    "text round column": lambda t: "\n".join(("x" + line[1:]) if line[:1].isdigit() else line
                                             for line in t.split("\n")),
    "empty file": lambda t: "",
    "foreign csv": lambda t: "a,b\n1,2\n",
    "nan round": lambda t: t.replace("\n1,", "\nnan,", 1),
    "negative round": lambda t: t.replace("\n1,", "\n-5,", 1),
    "huge field": lambda t: t.replace("\n1,", "\n1," + "9" * 200_000, 1),
}
BYTES_BAD = {
    "binary": b"\x00\x01\x02\xff" * 64,
    "non-UTF-8": b"round,val_acc\n1,\xff\xfe\n",
    "deep JSON": deep_json(100_000),
    "JSON list": b"[1, 2, 3]\n",
}


def run_dir_cases() -> list[Case]:
    cases: list[Case] = []
    commands = {"resume": lambda d: ["resume", str(d / "run"), "rounds=3", "progress=false"],
                "report": lambda d: ["report", str(d / "run")],
                "compare": lambda d: ["compare", str(d / "run"), "--out", str(d / "cmp")]}
    for cmd, argv in commands.items():
        for label, edit in ROUNDS_BAD.items():
            def setup(d: Path, edit: Callable[[str], str] = edit) -> None:
                text = (d / "run" / "rounds.csv").read_text()
                (d / "run" / "rounds.csv").write_text(edit(text))
            cases.append(Case("run-dir files", f"{cmd}: rounds.csv {label}", argv, setup))
        for fname in ("rounds.csv", "clusters.jsonl", "summary.json"):
            if cmd == "compare" and fname == "clusters.jsonl":
                continue
            if cmd == "report" and fname == "summary.json":
                continue  # report does not read it
            for label, data in [*BYTES_BAD.items(), ("a directory", None)]:
                rewritten = cmd == "resume" and fname == "summary.json"  # resume writes it anew: fine either way
                cases.append(Case("run-dir files", f"{cmd}: {fname} {label}", argv,
                                  lambda d, f=fname, b=data: plant(d, f, b), expect="either" if rewritten else "refuse",
                                  check=_summary_ok))
        for label, line in {"non-object line": b"[1]\n", "text round": b'{"round": "x", "concept": {}}\n',
                            "mass not a list": b'{"round": 1, "concept": {"names": ["a"], "mass": "x"}}\n',
                            "names not a list": b'{"round": 1, "concept": {"names": 5, "mass": [[1]]}}\n',
                            "ragged mass": b'{"round": 1, "concept": {"names": ["a", "b"], "mass": [[1], [1, 2]]}}\n',
                            }.items():
            if cmd != "compare":
                cases.append(Case("run-dir files", f"{cmd}: clusters.jsonl {label}", argv,
                                  lambda d, b=line: plant(d, "clusters.jsonl", b)))
        if cmd == "compare":
            for label, data in {"text final": b'{"final": "x", "best": 3}', "text in a number":
                                b'{"final": {"test_acc": "high"}, "best": {"val_acc": []}}'}.items():
                cases.append(Case("run-dir files", f"{cmd}: summary.json {label}", argv,
                                  lambda d, b=data: plant(d, "summary.json", b),
                                  expect="either", check=lambda d, out: True))
    return cases


def _summary_ok(d: Path, out: str) -> bool:
    try:
        return isinstance(json.loads((d / "run" / "summary.json").read_text())["final"], dict)
    except (OSError, ValueError, KeyError):
        return False


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def change(s: dict[str, Any]) -> None:
        target = s
        for k in keys[:-1]:
            target = target[k]
        del target[keys[-1]]
    return change


def _set(value: Any, *keys: str) -> Callable[[dict[str, Any]], None]:
    def change(s: dict[str, Any]) -> None:
        target = s
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value(target[keys[-1]]) if callable(value) else value
    return change


def checkpoint_cases() -> list[Case]:
    import torch

    changes: dict[str, Callable[[dict[str, Any]], None]] = {
        "no algorithm": _drop("algorithm"), "no round": _drop("round"), "no elapsed": _drop("elapsed"),
        "round as text": _set("2", "round"), "round negative": _set(-1, "round"), "round float": _set(1.5, "round"),
        "round bool": _set(True, "round"), "round beyond the run": _set(10**6, "round"),
        "elapsed text": _set("x", "elapsed"), "algorithm a list": _set([], "algorithm"),
        "algorithm a tensor": _set(torch.zeros(3), "algorithm"), "config a list": _set([1], "config"),
        "missing model key": _drop("algorithm", "models", "head.bias"),
        "missing omega": _drop("algorithm", "omega"), "extra key": _set(1, "algorithm", "surprise"),
        "wrong shape weights": _set(lambda t: torch.zeros(3, 7, 7), "algorithm", "models", "head.weight"),
        "integer weights": _set(lambda t: t.to(torch.int64), "algorithm", "models", "head.weight"),
        "models a list": _set([], "algorithm", "models"), "omega a tensor of text": _set("x", "algorithm", "omega"),
        "gamma wrong dtype": _set(lambda a: a.astype(np.int8), "algorithm", "gamma"),
        "rounds_done text": _set("x", "algorithm", "rounds_done"),
        "not a dict": lambda s: (s.clear()),
    }
    argv = lambda d: ["resume", str(d / "run"), "rounds=3", "progress=false"]  # noqa: E731
    return [Case("checkpoint schema", name, argv, lambda d, c=c: edit_checkpoint(d, c)) for name, c in changes.items()]


def path_cases() -> list[Case]:
    def loop(d: Path) -> None:
        (d / "a").symlink_to(d / "b")
        (d / "b").symlink_to(d / "a")

    def afile(d: Path) -> None:
        (d / "f").write_text("x")

    cases = [
        Case("paths", "out= 300-character name", lambda d: [*RUN, f"out={d / ('x' * 300)}"]),
        Case("paths", "out= 2100 levels", lambda d: [*RUN, "out=" + str(d) + "/a" * 2100]),
        Case("paths", "out=~nosuchuser", lambda d: [*RUN, "out=~nosuchuser/x"]),
        Case("paths", "out= symlink loop", lambda d: [*RUN, f"out={d / 'a' / 'x'}"], loop),
        Case("paths", "out= symlink loop itself", lambda d: [*RUN, f"out={d / 'a'}"], loop),
        Case("paths", "data_dir= symlink loop", lambda d: [*RUN, "dataset=mnist", f"data_dir={d / 'a'}"], loop),
    ]
    for where in ("/proc/fedcluster-x", "/sys/fedcluster-x", "FILE/x", "LOOP/x"):
        def argv_of(kind: str, w: str = where) -> Callable[[Path], list[str]]:
            def argv(d: Path) -> list[str]:
                p = w.replace("FILE", str(d / "f")).replace("LOOP", str(d / "a"))
                return {"compare": ["compare", str(base_run(d.parent)), "--out", p],
                        "reproduce": ["reproduce", "--out", p, "--list"],
                        "scenario": ["scenario", "concept-swap", "num_clients=4", "--out", p + ".png"],
                        "tensorboard": [*RUN, "tracking=[tensorboard]", f"tensorboard_dir={p}", f"out={d / 'r'}"],
                        "sqlite": [*RUN, "tracking=[mlflow]", f"tracking_uri=sqlite:///{p}.db", f"out={d / 'r'}"],
                        "demo": ["demo", "--out", p]}[kind]
            return argv
        for kind in ("compare", "reproduce", "scenario", "tensorboard", "sqlite", "demo"):
            cases.append(Case("paths", f"{kind} under {where}", argv_of(kind), lambda d: (afile(d), loop(d))))
    cases += [
        Case("paths", "scenario --out unknown extension",
             lambda d: ["scenario", "concept-swap", "num_clients=4", "--out", str(d / "x.pnq")]),
        Case("paths", "scenario --out no extension",
             lambda d: ["scenario", "concept-swap", "num_clients=4", "--out", str(d / "x")], expect="either",
             check=lambda d, out: any(d.glob("x*"))),
        Case("paths", "scenario --out a folder",
             lambda d: ["scenario", "concept-swap", "num_clients=4", "--out", str(d)], expect="either",
             check=lambda d, out: any(d.glob("*.png"))),
        Case("paths", "compare --out a file", lambda d: ["compare", str(base_run(d.parent)), "--out", str(d / "f")],
             afile),
    ]
    return cases


def _yaml_file(text: str | bytes) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / "c.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
    return setup


def idx(a: np.ndarray, code: int = 0x08) -> bytes:
    dtype = {0x08: ">u1", 0x0D: ">f4", 0x0E: ">f8", 0x0C: ">i4"}[code]
    return bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.astype(dtype).tobytes()


def mnist_files(images: np.ndarray, code: int = 0x08) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        n = len(images)
        (d / MNIST["train_images"]).write_bytes(idx(images, code))
        (d / MNIST["train_labels"]).write_bytes(idx(np.arange(n) % 10))
        (d / MNIST["test_images"]).write_bytes(idx(images[: n // 2], code))
        (d / MNIST["test_labels"]).write_bytes(idx(np.arange(n // 2) % 10))
    return setup


def parsing_cases() -> list[Case]:
    big = "9" * 5000
    deep = "[" * 5000 + "]" * 5000
    yaml_run = lambda d: ["run", str(d / "c.yaml"), "num_clients=4", "progress=false", f"out={d / 'r'}"]  # noqa: E731
    mnist = lambda *extra: lambda d: [*RUN, "dataset=mnist", f"data_dir={d}", f"out={d / 'r'}", *extra]  # noqa: E731
    rng = np.random.default_rng(0)
    return [
        Case("parsing", "rounds= 5000 digits", lambda d: [*RUN, f"rounds={big}"]),
        Case("parsing", "seed= -5000 digits", lambda d: [*RUN, f"seed=-{big}"]),
        Case("parsing", "YAML 5000-digit int", yaml_run, _yaml_file(f"rounds: {big}\n")),
        Case("parsing", "YAML 5000-deep list", yaml_run, _yaml_file(f"rounds: {deep}\n")),
        Case("parsing", "YAML 5000-deep mapping", yaml_run,
             _yaml_file("a: " * 5000 + "1\n")),
        Case("parsing", "override 5000-deep list", lambda d: [*RUN, f"algorithm.x={deep}"]),
        Case("parsing", "override 5000-deep mapping", lambda d: [*RUN, "algorithm.x=" + "{a: " * 5000 + "}" * 5000]),
        Case("parsing", "duplicate YAML keys", yaml_run,
             _yaml_file("rounds: 2\nrounds: 3\n")),
        Case("parsing", "duplicate nested YAML keys", yaml_run,
             _yaml_file("rounds: 1\nalgorithm:\n  name: ifca\n  name: cfl\n")),
        Case("parsing", "YAML sexagesimal rounds: 1:0", yaml_run,
             _yaml_file("rounds: 1:0\n")),
        Case("parsing", "override rounds=1:0", lambda d: [*RUN[:-2], "progress=false", "rounds=1:0"]),
        Case("parsing", "YAML octal seed: 0777", lambda d: ["run", str(d / "c.yaml"), f"out={d / 'r'}"],
             _yaml_file("seed: 0777\nnum_clients: 4\nrounds: 1\nprogress: false\n"), expect="either",
             check=lambda d, out: _seed_of(d / "r") == 777),
        Case("parsing", "override seed=0777", lambda d: [*RUN, "seed=0777", f"out={d / 'r'}"], expect="either",
             check=lambda d, out: _seed_of(d / "r") == 777),
        Case("parsing", "fedmd num_anchors=-1", lambda d: [*RUN, "algorithm=fedmd", "algorithm.num_anchors=-1"]),
        Case("parsing", "fedmd without delta on real data", lambda d: [*RUN, "algorithm=fedmd"]),
        Case("parsing", "cflgp t_cl=-1", lambda d: [*RUN, "algorithm=cflgp", "algorithm.t_cl=-1"]),
        Case("parsing", "idx images of zero width", mnist(), mnist_files(np.zeros((12, 6, 0)))),
        Case("parsing", "idx images 1x1 with the CNN", mnist("model=cnn"),
             mnist_files(rng.integers(0, 256, (12, 1, 1))), expect="either", check=lambda d, out: True),
        Case("parsing", "idx images 1x1 with the light CNN", mnist("model=cnn-light"),
             mnist_files(rng.integers(0, 256, (12, 1, 1))), expect="either", check=lambda d, out: True),
        Case("parsing", "idx images of 1e300", mnist(), mnist_files(np.full((12, 6, 6), 1e300), 0x0E)),
        Case("parsing", "idx images of -1e300", mnist(), mnist_files(np.full((12, 6, 6), -1e300), 0x0E)),
        Case("parsing", "run an unparseable secret file", lambda d: ["run", str(d / "shadow")],
             lambda d: (d / "shadow").write_text("root:$6$SECRETHASH:19000:0:99999:7:::\nx: [\n")),
    ]


def _seed_of(run: Path) -> int | None:
    import yaml
    try:
        return yaml.safe_load((run / "config.yaml").read_text())["seed"]
    except (OSError, KeyError, TypeError):
        return None


def resource_cases() -> list[Case]:
    def many_names(d: Path) -> None:
        names = [f"n{i}" for i in range(100_000)]
        rec = {"round": 1, "class": {"names": names, "mass": [[1.0] * len(names)]}}
        (d / "run" / "clusters.jsonl").write_text(json.dumps(rec) + "\n")

    return [
        Case("resources", "scenario.replicate=1000000", lambda d: [*RUN, "scenario=diverse-shift",
                                                                    "scenario.replicate=1000000"]),
        Case("resources", "report: clusters.jsonl with 100k names", lambda d: ["report", str(d / "run")],
             lambda d: (copy_run(d.parent, d), many_names(d)), expect="either",
             check=lambda d, out: "note" in out),
    ]


def api_cases() -> list[Case]:
    import fedcluster
    from fedcluster.errors import UserError

    def raises(fn: Callable[[Path], Any]) -> Callable[[Path], Any]:
        def call(d: Path) -> int:
            try:
                fn(d)
            except UserError as e:
                return 2 if "\n" not in str(e) else 1
            return 0
        return call

    def accepts(fn: Callable[[Path], Any]) -> Callable[[Path], Any]:
        def call(d: Path) -> int:
            fn(d)
            return 0
        return call

    small = {"num_clients": 4, "rounds": 1, "progress": False}
    calls = {
        "config of a wrong type": lambda d: fedcluster.run(42),
        "config a list": lambda d: fedcluster.run([1, 2]),
        "mapping with int keys": lambda d: fedcluster.run({1: 2}),
        "unknown keyword": lambda d: fedcluster.run(**small, nonsense=1),
        "rounds a string": lambda d: fedcluster.run(rounds="many"),
        "federation a string": lambda d: fedcluster.run(federation="fed", **small, out=str(d / "r")),
        "federation a dict": lambda d: fedcluster.run(federation={}, **small, out=str(d / "r")),
        "missing config path": lambda d: fedcluster.run(d / "nope.yaml"),
        "config path a folder": lambda d: fedcluster.run(d),
        "use_cache a string": lambda d: fedcluster.build_federation(small, use_cache="no"),
        "lr a numpy array": lambda d: fedcluster.run(lr=np.array([0.1, 0.2]), **small),
        "seed a numpy float NaN": lambda d: fedcluster.run(seed=np.float32("nan"), **small),
    }
    cases = [Case("library API", name, call=raises(fn)) for name, fn in calls.items()]
    cases += [
        Case("library API", "np.int64 and np.float32 values", expect="ok", check=lambda d, out: True,
             call=accepts(lambda d: fedcluster.load_config(num_clients=np.int64(4), lr=np.float32(0.05),
                                                           rounds=np.int32(2), **{"scenario.alpha": np.float64(1)}))),
        Case("library API", "federation of another size: not silent", expect="ok",
             check=lambda d, out: "is replaced by the 6 clients" in out,
             call=accepts(lambda d: fedcluster.run({"num_clients": 4, "rounds": 1, "progress": False,
                                                    "out": str(d / "r")},
                                                   federation=fedcluster.build_federation({"num_clients": 6})))),
        Case("library API", "np.bool_ value", expect="ok", check=lambda d, out: True,
             call=accepts(lambda d: fedcluster.load_config(progress=np.bool_(False)))),
    ]
    return cases


def smaller_cases() -> list[Case]:
    def straight_run(d: Path) -> None:
        copy_run(d.parent, d)
        _quiet(["run", "algorithm=ifca", "num_clients=6", "rounds=3", "progress=false", f"out={d / 'straight'}"])

    def same_summary(d: Path, out: str) -> bool:
        resumed, straight = (json.loads((d / p / "summary.json").read_text()) for p in ("run", "straight"))
        return resumed["best"] == straight["best"] and resumed["at_best_val"] == straight["at_best_val"]

    def interrupted_after_summary(d: Path) -> None:
        copy_run(d.parent, d)
        (d / "run" / "accuracy.png").unlink()

    def crafted_cache(d: Path) -> None:
        from fedcluster.storage.state_file import load_state, save_state
        base_run(d.parent)
        caches = sorted(Path(os.environ["FEDCLUSTER_CACHE"]).rglob("*"))
        for c in caches:
            if c.is_file():
                try:
                    meta_key = _key_of(c)
                    state = load_state(c, "federation", meta_key)
                except Exception:  # noqa: BLE001, S112
                    continue
                _poison_labels(state)
                save_state(c, state, "federation", meta_key)

    return [
        Case("smaller", "a resumed summary equals a straight run's (full precision)",
             lambda d: ["resume", str(d / "run"), "rounds=3", "progress=false"], straight_run, expect="ok",
             check=same_summary),
        Case("smaller", "resume after a kill before accuracy.png", lambda d: ["resume", str(d / "run")],
             interrupted_after_summary, expect="ok", check=lambda d, out: (d / "run" / "accuracy.png").exists()),
        Case("smaller", "cache with out-of-range labels and a recomputed checksum",
             lambda d: ["run", "algorithm=ifca", "num_clients=6", "rounds=2", "progress=false", f"out={d / 'r'}"],
             crafted_cache, expect="either",
             check=lambda d, out: "discarding" in out and (d / "r" / "summary.json").exists()),
    ]


def _key_of(path: Path) -> str:
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        return (f.metadata() or {}).get("key", "")


def _poison_labels(state: Any) -> None:
    """Labels 99 in every ``y`` array of a cached federation."""
    import torch
    seen: set[int] = set()

    def walk(x: Any) -> None:
        if id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "y" and isinstance(v, torch.Tensor | np.ndarray) and v.dtype in (torch.int64, np.int64):
                    v[...] = 99
                walk(v)
        elif isinstance(x, list | tuple):
            for v in x:
                walk(v)
        elif hasattr(x, "__dataclass_fields__"):
            walk(vars(x))
    walk(state)


def craft_state(path: Path, tree: str, tensors: dict[str, Any], kind: str = "checkpoint", key: str = "") -> None:
    """A state file with structure ``tree`` over ``tensors`` and a valid SHA-256 (what anyone can write)."""
    from safetensors.torch import save

    from fedcluster.storage.state_file import FORMAT, VERSION, _digest

    header = {"format": FORMAT, "version": VERSION, "kind": kind, "key": key, "tree": tree}
    path.write_bytes(save(tensors, metadata={**header, "sha256": _digest(header, tensors)}))


def crafted_file_cases() -> list[Case]:
    """Checkpoints and caches whose checksum is valid but whose content the writer never wrote."""
    import torch

    resume = lambda d: ["resume", str(d / "run"), "rounds=3", "progress=false"]  # noqa: E731
    trees = {
        "ndarray dtype V1000000000": '{"dict": [["a", {"ndarray": "0", "dtype": "V1000000000"}]]}',
        "ndarray dtype object": '{"dict": [["a", {"ndarray": "0", "dtype": "|O"}]]}',
        "ndarray dtype <U100000000": '{"dict": [["a", {"ndarray": "0", "dtype": "<U100000000"}]]}',
        "ndarray float64 over float32 bytes": '{"dict": [["a", {"ndarray": "0", "dtype": "<f8"}]]}',
        "numpy scalar V1000000000": '{"dict": [["a", {"np": "V1000000000", "value": 5}]]}',
        "numpy uint8 scalar -1": '{"dict": [["a", {"np": "<u1", "value": -1}]]}',
        "numpy int64 scalar 1e30": '{"dict": [["a", {"np": "<i8", "value": 1000000000000000000000000000000}]]}',
        "100 000 nested lists": "[" * 100_000 + "]" * 100_000,
        "2 000 nested dicts": '{"dict": [["a", ' * 2000 + "1" + "]]}" * 2000,
        "a tensor name that is a list": '{"dict": [["a", {"tensor": [1]}]]}',
        "an unregistered class": '{"object": "os.system", "fields": {"dict": []}}',
    }
    cases = [Case("crafted files", f"checkpoint: {name}", resume,
                  lambda d, t=tree: craft_state(d / "run" / "checkpoint.pt", t, {"0": torch.zeros(1000)}))
             for name, tree in trees.items()]

    def fedrc(d: Path) -> None:
        shutil.rmtree(d / "run", ignore_errors=True)
        shutil.copytree(base_run(d.parent, "fedrc"), d / "run")
        for lock in (d / "run").glob("*.lock"):
            lock.unlink()

    algorithm_changes: dict[str, Callable[[dict[str, Any]], None]] = {
        "models None": _set(None, "algorithm", "models"), "omega None": _set(None, "algorithm", "omega"),
        "counts None": _set(None, "algorithm", "counts"), "gamma None": _set(None, "algorithm", "gamma"),
        "omega NaN": _set(lambda a: np.full_like(a, np.nan), "algorithm", "omega"),
        "omega negative": _set(lambda a: -np.ones_like(a), "algorithm", "omega"),
        "K = 0": lambda s: s["algorithm"].update(models={n: v[:0] for n, v in s["algorithm"]["models"].items()}),
        "K = 2 (the run has 3)": lambda s: s["algorithm"].update(
            models={n: v[:2] for n, v in s["algorithm"]["models"].items()}, omega=s["algorithm"]["omega"][:, :2],
            gamma=s["algorithm"]["gamma"][:, :2], counts=s["algorithm"]["counts"][:, :2],
            marginal=s["algorithm"]["marginal"][:2]),
        "gamma one row short": _set(lambda a: a[:-1], "algorithm", "gamma"),
        "omega a client short": _set(lambda a: a[:-1], "algorithm", "omega"),
        "counts of 11 classes": _set(lambda a: np.concatenate([a, a[..., :1]], -1), "algorithm", "counts"),
    }
    for name, change in algorithm_changes.items():
        def setup(d: Path, change: Callable[[dict[str, Any]], None] = change) -> None:
            fedrc(d)
            edit_checkpoint(d, change)
        cases.append(Case("crafted files", f"FedRC checkpoint: {name}", resume, setup))

    def cache_case(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
        def setup(d: Path) -> None:
            from fedcluster.config.run_config import load_raw, resolve
            from fedcluster.data.build import cache_key, cache_path
            from fedcluster.storage.state_file import load_state, save_state

            cfg, typed = resolve(load_raw(None, ["num_clients=5", "seed=7"]))
            _quiet(["scenario", "concept-swap", "num_clients=5", "seed=7", "--out", str(d / "p.png")])
            path, key = cache_path(cfg, typed["scenario"]), cache_key(cfg, typed["scenario"])
            state = load_state(path, "federation", key)
            change(state)
            save_state(path, state, "federation", key)
        return setup

    cache_changes: dict[str, Callable[[dict[str, Any]], None]] = {
        "float64 inputs": lambda s: s["train"].update(x=s["train"]["x"].double()),
        "int32 labels": lambda s: s["train"].update(y=s["train"]["y"].int()),
        "uint8 labels": lambda s: s["val"].update(y=s["val"]["y"].to(torch.uint8)),
        "num_classes 11": lambda s: s.update(num_classes=11),
        "test_cluster 1e9": lambda s: s.update(test_cluster=np.full_like(s["test_cluster"], 10**9)),
        "inputs reshaped to (64,)": lambda s: [s[k].update(x=s[k]["x"].reshape(len(s[k]["x"]), -1))
                                               for k in ("train", "val", "test")],
        "another scenario's": lambda s: s["info"].update(name="label-skew"),
    }
    for name, change in cache_changes.items():
        cases.append(Case("crafted files", f"cache: {name}",
                          lambda d: ["run", "num_clients=5", "seed=7", "rounds=1", "progress=false", f"out={d / 'r'}"],
                          cache_case(change), expect="ok",
                          check=lambda d, out: "discarding" in out and (d / "r" / "summary.json").exists()))
    return cases


def _with_env(env: dict[str, str], argv: Callable[[Path], list[str]]) -> Callable[[Path], Any]:
    """A call of ``main(argv)`` with ``env`` set (and restored after)."""
    def call(d: Path) -> int:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return main(argv(d))
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
    return call


def environment_cases() -> list[Case]:
    run = lambda d: [*RUN, f"out={d / 'r'}"]  # noqa: E731
    two = lambda d: [*RUN, "ranks=2", f"out={d / 'r'}"]  # noqa: E731
    cases = [Case("environment", f"FEDCLUSTER_COLLECTIVE_TIMEOUT={v} with ranks=2",
                  call=_with_env({"FEDCLUSTER_COLLECTIVE_TIMEOUT": v}, two), expect="either",
                  check=lambda d, out: False) for v in ("abc", "nan", "0", "-1", "inf", "1e400")]
    cases += [
        Case("environment", "FEDCLUSTER_COLLECTIVE_TIMEOUT=abc, one process",
             call=_with_env({"FEDCLUSTER_COLLECTIVE_TIMEOUT": "abc"}, run), expect="ok",
             check=lambda d, out: (d / "r" / "summary.json").exists()),
        Case("environment", "RANK=1 WORLD_SIZE=4 left without MASTER_ADDR",
             call=_with_env({"RANK": "1", "WORLD_SIZE": "4"}, run), expect="ok",
             check=lambda d, out: "MASTER_ADDR is not" in out and (d / "r" / "summary.json").exists()),
        Case("environment", "WORLD_SIZE=abc", call=_with_env({"WORLD_SIZE": "abc"}, run), expect="either",
             check=lambda d, out: False),
        Case("environment", "RANK=abc", call=_with_env({"RANK": "abc", "WORLD_SIZE": "2"}, run), expect="either",
             check=lambda d, out: False),
        Case("environment", "RANK=5 of WORLD_SIZE=2 with MASTER_ADDR",
             call=_with_env({"RANK": "5", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost"}, run), expect="either",
             check=lambda d, out: False),
    ]
    return cases


def ranks_cases() -> list[Case]:
    return [
        Case("ranks", "ranks=64 for 4 clients", lambda d: [*RUN, "ranks=64", f"out={d / 'r'}"]),
        Case("ranks", "ranks=1000000", lambda d: [*RUN, "num_clients=2000000", "ranks=1000000", f"out={d / 'r'}"]),
        Case("ranks", "ranks beyond the cores", lambda d: [*RUN, "num_clients=10000", "ranks=5000",
                                                           f"out={d / 'r'}"]),
        Case("ranks", "resume with ranks=64", lambda d: ["resume", str(copy_run(d.parent, d)), "rounds=3",
                                                         "ranks=64", "progress=false"]),
        Case("ranks", "flower simulate ranks=2",
             lambda d: ["flower", "simulate", *RUN[1:], "ranks=2", f"out={d / 'r'}"]),
    ]


def more_api_cases() -> list[Case]:
    import fedcluster
    from fedcluster.errors import UserError

    def raises(fn: Callable[[Path], Any]) -> Callable[[Path], Any]:
        def call(d: Path) -> int:
            try:
                fn(d)
            except UserError as e:
                return 2 if "\n" not in str(e) else 1
            return 0
        return call

    small = {"rounds": 1, "progress": False}
    digits = lambda: fedcluster.build_federation({"num_clients": 6})  # noqa: E731
    calls = {
        "digits federation under dataset=mixed-regression":
            lambda d: fedcluster.run({**small, "dataset": "mixed-regression", "out": str(d / "r")},
                                     federation=digits()),
        "federation under another scenario":
            lambda d: fedcluster.run({**small, "scenario": "label-skew", "out": str(d / "r")}, federation=digits()),
        "federation under another data seed":
            lambda d: fedcluster.run({**small, "data_seed": 9, "out": str(d / "r")}, federation=digits()),
        "run(ranks=2)": lambda d: fedcluster.run({**small, "num_clients": 4, "out": str(d / "r")}, ranks=2),
        "run(out='a\\x00b')": lambda d: fedcluster.run(out="a\x00b", **small),
        "tracking_experiment with NUL": lambda d: fedcluster.load_config(tracking_experiment="a\x00b"),
        "key with U+2028": lambda d: fedcluster.load_config(**{"rounds\u2028": 2}),
        "build_federation(data_dir with NUL)": lambda d: fedcluster.build_federation(data_dir="a\x00b"),
    }
    return [Case("library API", name, call=raises(fn)) for name, fn in calls.items()]


# -- round four: the data behind the cache, the new methods' state, the readers, bounds, environment -----------
def _mnist_folder(folder: Path, train: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", train), ("t10k", 10)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        (folder / f"{name}-images-idx3-ubyte").write_bytes(idx(images))
        (folder / f"{name}-labels-idx1-ubyte").write_bytes(idx(rng.integers(0, 10, n).astype(np.uint8)))


def _in_folder(folder: Callable[[Path], Path], argv: Callable[[Path], list[str]]) -> Callable[[Path], Any]:
    def call(d: Path) -> int:
        here = Path.cwd()
        os.chdir(folder(d))
        try:
            return main(argv(d))
        finally:
            os.chdir(here)
    return call


def _samples(d: Path) -> int:
    """Training plus validation samples of the run's federation (its summary's first line)."""
    import re

    found = re.search(r"(\d+) train / (\d+) val", json.loads((d / "r" / "summary.json").read_text())["federation"])
    return int(found[1]) + int(found[2]) if found else -1


def cache_key_cases() -> list[Case]:
    mnist = lambda d: ["run", "dataset=mnist", "data_dir=data", "scenario=iid", "num_clients=2", "rounds=1",  # noqa: E731
                       "progress=false", "model=logistic", f"out={d / 'r'}"]

    def two_folders(d: Path) -> None:
        _mnist_folder(d / "a" / "data", 40)
        _mnist_folder(d / "b" / "data", 30, seed=1)
        with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
            assert _in_folder(lambda d: d / "a", lambda d: [*mnist(d)[:-1], f"out={d / 'first'}"])(d) == 0

    def changed(d: Path) -> None:
        _mnist_folder(d / "data", 40)
        with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
            assert _in_folder(lambda d: d, lambda d: [*mnist(d)[:-1], f"out={d / 'first'}"])(d) == 0
        (d / "data" / "t10k-labels-idx1-ubyte").unlink()

    return [
        Case("cache key", "the same relative data_dir in another folder", call=_in_folder(lambda d: d / "b", mnist),
             setup=two_folders, expect="ok",
             check=lambda d, out: (d / "r" / "summary.json").exists() and _samples(d) == 30),
        Case("cache key", "a data file removed after the first run", call=_in_folder(lambda d: d, mnist),
             setup=changed),
    ]


def _new_state(method: str, key: str, make: Callable[[Any], Any]) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        shutil.rmtree(d / "run", ignore_errors=True)
        copy_run(d.parent, d, method)

        def change(state: dict[str, Any]) -> None:
            state["algorithm"][key] = make(state["algorithm"][key])
        edit_checkpoint(d, change)
    return setup


def new_method_state_cases() -> list[Case]:
    crafts = {
        "fedgwc interaction of no cluster": ("fedgwc", "interaction", lambda v: []),
        "fedgwc mse nan": ("fedgwc", "mse", lambda v: [float("nan")] * len(v)),
        "fedgwc waited 10^6": ("fedgwc", "waited", lambda v: [10**6] * len(v)),
        "fedgwc open of two clusters": ("fedgwc", "open", lambda v: [True, True]),
        "flhc cluster ids 999": ("flhc", "cluster", lambda v: np.full_like(v, 999)),
        "flhc book ids 999": ("flhc", "book", lambda b: {**b, "ids": [999] * len(b["ids"])}),
        "clove model_of 999": ("clove", "model_of", lambda v: np.full_like(v, 999)),
        "clove unchanged -10^6": ("clove", "unchanged", lambda v: np.full_like(v, -10**6)),
        "fedgroup directions [3,5]": ("fedgroup", "directions", lambda v: np.ones((3, 5), np.float32)),
        "fedgroup cluster -1": ("fedgroup", "cluster", lambda v: np.full_like(v, -1)),
    }
    return [Case("new-method state", name, lambda d: ["resume", str(d / "run"), "rounds=3", "progress=false"],
                 _new_state(method, key, make)) for name, (method, key, make) in crafts.items()]


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


def bound_cases() -> list[Case]:
    """One case per bounded key (read from the bounds table, so a key added there is tried here too)."""
    import dataclasses as dc

    from fedcluster.catalog.registry import ALGORITHMS, MODELS, SCENARIOS
    from fedcluster.config.bounds import PARAM_BOUNDS, RUN_BOUNDS

    cases = [Case("bounds", f"{key}={bound + 1}", lambda d, k=key, b=bound: [*RUN, f"{k}={b + 1}", f"out={d / 'r'}"])
             for key, bound in RUN_BOUNDS.items()]
    for param, bound in PARAM_BOUNDS.items():
        section, name, listed = next((s, e.name, "list" in str(f.type)) for s, reg in (
            ("algorithm", ALGORITHMS), ("scenario", SCENARIOS), ("model", MODELS)) for e in reg
            if e.params is not None for f in dc.fields(e.params) if f.name == param)
        value = f"[{bound + 1}]" if listed else str(bound + 1)
        cases.append(Case("bounds", f"{section}={name} {section}.{param}={value}",
                          lambda d, s=section, n=name, p=param, v=value: [*RUN, f"{s}={n}", f"{s}.{p}={v}",
                                                                          f"out={d / 'r'}"]))
    node = ["flower", "node", "--superlink", "127.0.0.1:9", "--partition-id", "0", "--insecure", "--connect-timeout"]
    cases += [Case("bounds", "reproduce --seeds 10^9", lambda d: ["reproduce", "s3-cflgp-lines", "--seeds", "10" * 5]),
              Case("bounds", "flower node --connect-timeout inf", lambda d: [*node, "inf"]),
              Case("bounds", "flower node --connect-timeout 1e12", lambda d: [*node, "1e12"])]
    return cases


def _serve_under_a_long_tmpdir(d: Path) -> int:
    import tempfile

    folder = d / ("t" * 100) / ("u" * 100)
    folder.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = None  # read TMPDIR again, now and after
    try:
        return _with_env({"TMPDIR": str(folder)}, lambda d: ["flower", "serve", "--superlink", "no-port",
                                                             "--insecure", *RUN[1:], f"out={d / 'r'}"])(d)
    finally:
        tempfile.tempdir = None


def round_four_environment_cases() -> list[Case]:
    run = lambda d: [*RUN, f"out={d / 'r'}"]  # noqa: E731
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    stale = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "FEDCLUSTER_COLLECTIVE_TIMEOUT": "3"}
    return [
        Case("environment", "a stale torchrun environment: no rank 1", call=_with_env({**stale, "MASTER_PORT": port},
                                                                                      run)),
        Case("environment", "a stale torchrun environment: no MASTER_PORT", call=_with_env(stale, run)),
        Case("environment", "FEDCLUSTER_CACHE=''", expect="ok",
             call=lambda d: _with_env({"FEDCLUSTER_CACHE": "", "HOME": str(d / "home")}, run)(d),
             check=lambda d, out: "FEDCLUSTER_CACHE is empty" in out and not Path("federations").exists()
             and (d / "home" / ".cache" / "fedcluster" / "federations").is_dir()),
        Case("environment", "FedGroup num_groups=100 of 4 clients",
             lambda d: [*RUN, "algorithm=fedgroup", "algorithm.num_groups=100", f"out={d / 'r'}"]),
        Case("environment", "MLflow at a closed port: the error before any summary",
             lambda d: [*RUN, "tracking=mlflow", f"tracking_uri=http://127.0.0.1:{port}/", f"out={d / 'r'}"]),
        Case("environment", "MLFLOW_TRACKING_URI honoured", expect="ok",
             call=lambda d: _with_env({"MLFLOW_TRACKING_URI": f"sqlite:///{d / 'm.db'}"},
                                      lambda d: [*run(d), "tracking=mlflow"])(d),
             check=lambda d, out: "MLFLOW_TRACKING_URI" in out and (d / "m.db").is_file()),
        Case("environment", "flower serve with a bad address under a 200-byte TMPDIR",
             call=_serve_under_a_long_tmpdir),
        Case("environment", "FL+HC cluster_round past the last round", expect="ok",
             argv=lambda d: [*RUN, "algorithm=flhc", "algorithm.cluster_round=5", f"out={d / 'r'}"],
             check=lambda d, out: "past the last round" in out),
    ]


ALL = (run_dir_cases, checkpoint_cases, path_cases, parsing_cases, resource_cases, api_cases, smaller_cases,
       crafted_file_cases, environment_cases, ranks_cases, more_api_cases, cache_key_cases, new_method_state_cases,
       reader_cases, bound_cases, round_four_environment_cases)


class Hang(BaseException):
    """A case ran past its time (a blocked read, a wait without end)."""


def _expire(*_: object) -> None:
    raise Hang


def outcome(case: Case, d: Path, seconds: int = 120) -> tuple[str, str]:
    err, out = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.alarm(seconds)
    try:
        if case.setup is not None:
            case.setup(d)
        with redirect_stderr(err), redirect_stdout(out):
            try:
                rc = case.call(d) if case.call is not None else main(case.argv(d))
            except SystemExit as e:
                rc = e.code
    except Hang:
        return "hang", f"still running after {seconds} s"
    except RecursionError:
        return "traceback", "RecursionError"
    except MemoryError:
        return "traceback", "MemoryError"
    except Exception as e:  # noqa: BLE001 (counting what escapes is the point)
        return "traceback", "".join(traceback.format_exception_only(e)).strip()[-300:]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    text = err.getvalue() + out.getvalue()
    errors = [line for line in err.getvalue().splitlines() if not line.startswith("fedcluster: note:")
              and not line.startswith("  ") and "%|" not in line]
    errors = [line for line in errors if line.startswith("fedcluster: error") or rc == 2]
    ok_check = case.check is not None and rc == 0 and case.check(d, text)
    if case.call is not None and case.expect == "refuse" and rc == 2:  # a UserError of one line
        return "clean", "UserError"
    if case.expect in ("refuse", "either") and rc == 2 and len(errors) == 1:
        return "clean", errors[0][:200]
    if case.expect in ("ok", "either") and ok_check:
        return "clean", "ok"
    if rc == 0:
        return "silent", text.strip().splitlines()[-1][:200] if text.strip() else "exit 0"
    return "other", f"exit {rc}: {text.strip()[-300:]}"


def main_cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="run one family (e.g. 'checkpoint schema')")
    ap.add_argument("--show", action="store_true", help="print every case, not only the failures")
    ap.add_argument("--skip", action="append", default=[],
                    help="skip the cases whose name holds this text (e.g. to spare a machine an older version's "
                         "out-of-memory cases)")
    ap.add_argument("--case-seconds", type=int, default=120, help="a case running longer counts as a hang")
    args = ap.parse_args()
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.setdefault("FEDCLUSTER_CACHE", str(root / "cache"))
        cases = [c for make in ALL for c in make() if args.only in (None, c.family)
                 and not any(text in c.name for text in args.skip)]
        for i, case in enumerate(cases):
            d = root / f"case{i}"
            d.mkdir()
            if case.family in ("run-dir files", "checkpoint schema", "crafted files"):
                copy_run(root, d)
            result, detail = outcome(case, d, args.case_seconds)
            counts[result] += 1
            if args.show or result != "clean":
                print(f"{result:9s} [{case.family}] {case.name}: {' '.join(detail.split())[:240]}", flush=True)
            shutil.rmtree(d, ignore_errors=True)
    print(f"tried {sum(counts.values())}: clean {counts['clean']}, traceback {counts['traceback']}, "
          f"silent {counts['silent']}, hang {counts['hang']}, other {counts['other']}")
    return 0 if counts["clean"] == sum(counts.values()) else 1


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    sys.exit(main_cli())
