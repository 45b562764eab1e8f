"""docs/extending.md's worked examples are real files: import them, run them, check what the guide claims."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import fedcluster
from fedcluster.app.describe import describe_name
from fedcluster.errors import ConfigError

DOCS = Path(__file__).parents[2] / "docs"
SMALL = {"num_clients": 8, "rounds": 3, "progress": False, "model": "logistic"}


def _load(name: str) -> ModuleType:
    """Import docs/examples/<name>.py once (registering twice is an error)."""
    key = f"fedcluster_docs_example_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, DOCS / "examples" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


@pytest.fixture(scope="module", autouse=True)
def examples() -> None:
    _load("my_method")
    _load("my_scenario")


def _rows(path: Path) -> list[dict[str, str]]:
    with (path / "rounds.csv").open() as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


def test_guide_names_the_example_files() -> None:
    guide = (DOCS / "extending.md").read_text()
    for name in ("examples/my_method.py", "examples/my_scenario.py", "tempered-em", "inverted"):
        assert name in guide


def test_my_scenario_builds_two_concepts_with_inverted_images() -> None:
    fed = fedcluster.build_federation({"scenario": "inverted", "num_clients": 10}, use_cache=False)
    assert fed.num_clients == 10 and sorted(np.unique(fed.true_cluster)) == [0, 1]
    assert (fed.true_cluster == 1).sum() == 5
    x0, _ = fed.test.client(0)
    x1, _ = fed.test.client(1)
    assert np.allclose(x1.numpy(), 1.0 - x0.numpy())


def test_my_method_runs_on_my_scenario_and_is_fedem_at_temperature_one(tmp_path: Path) -> None:
    res = fedcluster.run({**SMALL, "scenario": "inverted", "algorithm": {"name": "tempered-em", "num_clusters": 2,
                                                                         "temperature": 3.0}}, out=str(tmp_path / "t"))
    assert [r["num_clusters"] for r in res.rows] == [2.0, 2.0, 2.0] and np.isfinite(res.rows[-1]["test_acc"])
    one = fedcluster.run({**SMALL, "algorithm": {"name": "tempered-em", "num_clusters": 2, "temperature": 1.0}},
                         out=str(tmp_path / "one"))
    em = fedcluster.run({**SMALL, "algorithm": {"name": "fedem", "num_clusters": 2}}, out=str(tmp_path / "em"))
    hot = fedcluster.run({**SMALL, "algorithm": {"name": "tempered-em", "num_clusters": 2, "temperature": 3.0}},
                         out=str(tmp_path / "hot"))
    assert _rows(one.run_dir) == _rows(em.run_dir)
    assert _rows(hot.run_dir) != _rows(em.run_dir)


def test_my_method_is_documented_and_validated() -> None:
    text = describe_name("tempered-em")
    line = next(ln for ln in text.splitlines() if "algorithm.temperature" in ln)
    assert line.split()[1:3] == ["float", "2.0"] and "FedEM" in line
    with pytest.raises(ConfigError, match="temperature must be > 0"):
        fedcluster.load_config(algorithm={"name": "tempered-em", "temperature": 0})
