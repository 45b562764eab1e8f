"""The newest surface: true/false among LEAF's numbers, a FEMNIST federation served from the cache, method rates
past float32, loop counts past their bounds, a full or too small output folder."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedcluster.app.cli import main
from tests.bad_inputs.core import RUN, Case
from tests.bad_inputs.readers import _leaf

LEAF_RUN = ["run", "dataset=femnist", "scenario=natural", "num_clients=2", "scenario.min_samples=1",
            "model=logistic", "rounds=1", "progress=false"]


def _leaf_with(where: str, index: int, value: Any) -> Callable[[Path], None]:
    """LEAF files whose first writer holds ``value`` at ``where`` ("x": a pixel of its first row, "y": a label)."""
    def setup(d: Path) -> None:
        _leaf(d)
        path = d / "leaf" / "all_data" / "a.json"
        text = path.read_text()
        import json
        doc = json.loads(text)
        target = doc["user_data"]["w0"]["x"][0] if where == "x" else doc["user_data"]["w0"]["y"]
        target[index] = value
        path.write_text(json.dumps(doc))
    return setup


def _patched(target: Any, name: str, value: Any, argv: Callable[[Path], list[str]]) -> Callable[[Path], int]:
    def call(d: Path) -> int:
        saved = getattr(target, name)
        setattr(target, name, value)
        try:
            return main(argv(d))
        finally:
            setattr(target, name, saved)
    return call



def _served_twice(d: Path) -> int:
    argv = [*LEAF_RUN, f"data_dir={d / 'leaf'}"]
    if main([*argv, f"out={d / 'first'}"]) != 0:
        return 1
    return main([*argv, f"out={d / 'r'}"])


def surface_cases() -> list[Case]:
    from fedcluster.tracking import run_dir

    leaf = lambda d: [*LEAF_RUN, f"data_dir={d / 'leaf'}", f"out={d / 'r'}"]  # noqa: E731
    cases = [Case("new surface", f"FEMNIST: {label}", leaf, _leaf_with(where, i, v))
             for label, where, i, v in (("a pixel true", "x", 3, True), ("a pixel false", "x", 0, False),
                                        ("the last pixel true", "x", 783, True), ("a label true", "y", 0, True),
                                        ("a label false", "y", 2, False))]
    cases.append(Case("new surface", "FEMNIST: a writer named true is read", leaf,
                      lambda d: (_leaf(d), _rename_writer(d / "leaf" / "all_data" / "a.json")), expect="ok",
                      check=lambda d, out: (d / "r" / "summary.json").exists()))
    cases.append(Case("new surface", "FEMNIST: a cached federation missing classes is served", call=_served_twice,
                      setup=_leaf, expect="ok", check=lambda d, out: "discarding" not in out
                      and (d / "r" / "summary.json").exists()))
    for method, key, value in (("pfedme", "personal_lr", "1e300"), ("pfedme", "beta", "1e300"),
                               ("pfedme", "lam", "-1e300"), ("apfl", "alpha_lr", "1e300"),
                               ("cgpfl", "n_init", "1000000000"), ("wecfl", "n_init", "1000000000"),
                               ("lcfed", "rank", "1000000000"), ("lcfed", "pca_clients", "1000000000"),
                               ("pfedme", "inner_steps", "1000000000"), ("pfedme", "personal_lr", "nan")):
        cases.append(Case("new surface", f"{method} {key}={value}",
                          lambda d, m=method, k=key, v=value: [*RUN, f"algorithm={m}", f"algorithm.{k}={v}",
                                                               f"out={d / 'r'}"]))
    cases += [
        Case("new surface", "a full out= folder", call=_patched(
            run_dir, "os", _FullOs(), lambda d: [*RUN, f"out={d / 'r'}"])),
        Case("new surface", "an out= folder with 10 kB free", call=_patched(
            run_dir.shutil, "disk_usage", lambda p, usage=shutil.disk_usage: usage(p)._replace(free=10_000),
            lambda d: [*RUN, f"out={d / 'r'}"])),
    ]
    return cases


def _rename_writer(path: Path) -> None:
    import json
    doc = json.loads(path.read_text())
    doc["users"][0] = "true false"
    doc["user_data"]["true false"] = doc["user_data"].pop("w0")
    path.write_text(json.dumps(doc))


class _FullOs:
    """``os`` as the run folder sees it on a full disk: every flush to disk fails with ENOSPC."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
