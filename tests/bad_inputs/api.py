"""The library API called with values of wrong types, and a few results that must stay right."""


import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.bad_inputs.core import Case, _quiet, base_run, copy_run
from tests.bad_inputs.run_dirs import _key_of, _poison_labels


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
