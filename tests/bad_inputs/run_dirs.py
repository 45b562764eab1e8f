"""Damaged run folders: rounds.csv, clusters.jsonl, summary.json, the checkpoint's structure, crafted state
files and the newer methods' crafted state."""


import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.bad_inputs.core import (
    BYTES_BAD,
    ROUNDS_BAD,
    Case,
    _drop,
    _quiet,
    _set,
    base_run,
    copy_run,
    edit_checkpoint,
    plant,
)


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
