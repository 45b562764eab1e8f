"""Crafted checkpoints of FedGWC, FL+HC, CLoVE, FedGroup, HCFL, IFCA, WeCFL, LCFed, CGPFL and APFL: values the
writer never writes, rewritten with a valid checksum, are refused on resume in one line, exit 2 (never a traceback,
never a run that finishes on them)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedcluster.app.cli import main
from fedcluster.storage.state_file import load_state, save_state
from tests.bad_inputs.test_bad_run_dir_properties import refused

METHODS = {  # as tests/algorithms/test_grouping_methods.py runs them: every method has clustered after 2 rounds
    "flhc": ["algorithm.cluster_round=1", "algorithm.distance_threshold=0.3"],
    "fedgroup": ["algorithm.num_groups=2"],
    "fedgwc": ["algorithm.eps=1", "algorithm.patience=1", "algorithm.min_cluster_size=3", "clients_per_round=0.5"],
    "clove": ["algorithm.num_clusters=3"],
    "hcfl": ["algorithm.rho=0", "algorithm.num_clusters=2"],  # the soft family, K changing (the base's checks)
    "ifca": [],  # the soft family, K fixed
    "wecfl": [], "lcfed": [], "cgpfl": [], "apfl": [],  # hard positions of a fixed K; a personal mixture weight
}
FAST = ["num_clients=8", "progress=false", "threads=1", "rounds=2"]

Craft = Callable[[dict[str, Any]], None]


def _set(key: str, make: Callable[[Any], Any]) -> Craft:
    def craft(alg: dict[str, Any]) -> None:
        alg[key] = make(alg[key])
    return craft


CRAFTS: dict[str, tuple[str, Craft, str]] = {  # case: (method, change to the algorithm state, word the line names)
    "fedgwc interaction one short": ("fedgwc", _set("interaction", lambda v: v[:-1]), "interaction"),
    "fedgwc mse one long": ("fedgwc", _set("mse", lambda v: [*v, 1.0]), "mse"),
    "fedgwc open empty": ("fedgwc", _set("open", lambda v: []), "open"),
    "fedgwc interaction one too wide": ("fedgwc",
                                        _set("interaction", lambda v: [np.ones((len(x) + 1,) * 2) for x in v]),
                                        "interaction"),
    "fedgwc interaction 1e6x1e6 claimed": ("fedgwc", _set("interaction", lambda v: [x[:1] for x in v]),
                                           "interaction"),
    "fedgwc interaction nan": ("fedgwc", _set("interaction", lambda v: [np.full_like(x, np.nan) for x in v]),
                               "interaction"),
    "fedgwc waited 10^6": ("fedgwc", _set("waited", lambda v: [10**6] * len(v)), "waited"),
    "fedgwc waited -1": ("fedgwc", _set("waited", lambda v: [-1] * len(v)), "waited"),
    "fedgwc waited text": ("fedgwc", _set("waited", lambda v: ["x"] * len(v)), "waited"),
    "fedgwc mse nan": ("fedgwc", _set("mse", lambda v: [float("nan")] * len(v)), "mse"),
    "flhc cluster ids 999": ("flhc", _set("cluster", lambda v: np.full_like(v, 999)), "cluster"),
    "flhc cluster ids -1": ("flhc", _set("cluster", lambda v: np.full_like(v, -1)), "cluster"),
    "flhc book ids 999": ("flhc", _set("book", lambda b: {**b, "ids": [999] * len(b["ids"])}), "book"),
    "flhc book one id short": ("flhc", _set("book", lambda b: {**b, "ids": b["ids"][:-1]}), "book"),
    "flhc not clustered with clusters": ("flhc", _set("clustered", lambda v: False), "clustered"),
    "clove model_of 999": ("clove", _set("model_of", lambda v: np.full_like(v, 999)), "model_of"),
    "clove unchanged -10^6": ("clove", _set("unchanged", lambda v: np.full_like(v, -10**6)), "unchanged"),
    "clove unchanged 10^6": ("clove", _set("unchanged", lambda v: np.full_like(v, 10**6)), "unchanged"),
    "fedgroup directions [3,5]": ("fedgroup", _set("directions", lambda v: np.ones((3, 5), np.float32)),
                                  "directions"),
    "fedgroup directions nan": ("fedgroup", _set("directions", lambda v: np.full_like(v, np.nan)), "directions"),
    "fedgroup cluster ids 999": ("fedgroup", _set("cluster", lambda v: np.full_like(v, 999)), "cluster"),
    "fedgroup rounds_done -5": ("fedgroup", _set("rounds_done", lambda v: -5), "rounds_done"),
    "hcfl book ids 999": ("hcfl", _set("book", lambda b: {**b, "ids": [999] * len(b["ids"])}), "book"),
    "hcfl book one id short": ("hcfl", _set("book", lambda b: {**b, "ids": b["ids"][:-1]}), "book"),
    "hcfl rounds_done 10^6": ("hcfl", _set("rounds_done", lambda v: 10**6), "rounds_done"),
    "ifca rounds_done -5": ("ifca", _set("rounds_done", lambda v: -5), "rounds_done"),
    "wecfl assigned 999": ("wecfl", _set("assigned", lambda v: np.full_like(v, 999)), "assigned"),
    "lcfed assigned 999": ("lcfed", _set("assigned", lambda v: np.full_like(v, 999)), "assigned"),
    "cgpfl assigned 999": ("cgpfl", _set("assigned", lambda v: np.full_like(v, 999)), "assigned"),
    "apfl alpha nan": ("apfl", _set("alpha", lambda v: np.full_like(v, np.nan)), "alpha"),
    "apfl alpha 2": ("apfl", _set("alpha", lambda v: np.full_like(v, 2.0)), "alpha"),
    "ifca gamma rows of 2": ("ifca", _set("gamma", lambda v: v * 2), "gamma"),
    "ifca omega rows of 0": ("ifca", _set("omega", lambda v: v * 0), "omega"),
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("finished")
    for name, extra in METHODS.items():
        assert main(["run", f"algorithm={name}", *extra, *FAST, f"out={root / name}"]) == 0
    return {name: root / name for name in METHODS}


@pytest.mark.parametrize("case", list(CRAFTS))
def test_a_crafted_state_of_a_new_method_is_refused_on_resume(finished: dict[str, Path], tmp_path: Path,
                                                              case: str) -> None:
    method, craft, word = CRAFTS[case]
    run = tmp_path / "run"
    shutil.copytree(finished[method], run)
    for lock in run.glob("*.lock"):
        lock.unlink()
    state = load_state(run / "checkpoint.pt", "checkpoint")
    craft(state["algorithm"])
    save_state(run / "checkpoint.pt", state, "checkpoint")
    line = refused(["resume", str(run), "rounds=4", "progress=false"], "checkpoint")
    assert word in line, line


@pytest.mark.parametrize("method", list(METHODS))
def test_an_untouched_checkpoint_of_a_new_method_still_resumes(finished: dict[str, Path], tmp_path: Path,
                                                               method: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished[method], run)
    for lock in run.glob("*.lock"):
        lock.unlink()
    assert main(["resume", str(run), "rounds=3", "progress=false"]) == 0
