"""configs/ (every shipped YAML resolves), the YAML format (nested sections) and YAML errors with a line number."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedcluster.app.demo import METHODS, demo_config
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.errors import ConfigError

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


def test_configs_ship_every_paper_experiment_and_the_demo() -> None:
    names = {p.stem for p in CONFIGS}
    for needed in ("demo", "s4-diverse-shift-fashion-mnist", "s1-adaptive-hcfl-shift", "s2-mixed-regression-A",
                   "s2-mixed-regression-B", "s2-mixed-regression-C", "s3-cflgp-lines", "s3-rotation-fashion-mnist"):
        assert needed in names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_config_resolves(path: Path) -> None:
    cfg, typed = resolve(load_raw(path, []))
    raw_text = path.read_text()
    assert f"name: {cfg.algorithm}" in raw_text or f"algorithm: {cfg.algorithm}" in raw_text
    assert typed["algorithm"] is not None or cfg.algorithm in ("fedavg",)


def test_demo_yaml_is_the_demo_clustered_run() -> None:
    clustered = next(m for m in METHODS if m != "fedavg")
    from_file, _ = resolve(load_raw(CONFIGS[[p.stem for p in CONFIGS].index("demo")], []))
    from fedcluster.app.api import load_config

    in_code, _ = load_config(demo_config(clustered))
    assert from_file == in_code


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_nested_sections_equal_flat_and_dotted_forms(tmp_path: Path) -> None:
    nested = _write(tmp_path, "algorithm: {name: fedprox, mu: 0.1}\nscenario:\n  name: label-skew\n  alpha: 0.3\n"
                              "model: {name: mlp, hidden: [64]}\nrounds: 5\n")
    flat = ["algorithm=fedprox", "algorithm.mu=0.1", "scenario=label-skew", "scenario.alpha=0.3", "model=mlp",
            "model.hidden=[64]", "rounds=5"]
    a, ta = resolve(load_raw(nested, []))
    b, tb = resolve(load_raw(None, flat))
    assert a == b and ta == tb
    assert a.algorithm_params["mu"] == 0.1 and a.model_params["hidden"] == [64]
    c, _ = resolve(load_raw(_write(tmp_path, "algorithm: fedprox\nalgorithm_params: {mu: 0.1}\n"), []))
    assert c.algorithm == "fedprox" and c.algorithm_params["mu"] == 0.1


def test_nested_section_without_name_sets_parameters_and_overrides_win(tmp_path: Path) -> None:
    p = _write(tmp_path, "algorithm: {name: ifca, num_clusters: 4}\n")
    cfg, _ = resolve(load_raw(p, ["algorithm.num_clusters=2"]))
    assert cfg.algorithm == "ifca" and cfg.algorithm_params["num_clusters"] == 2
    cfg, _ = resolve(load_raw(_write(tmp_path, "algorithm: {mu: 0.2}\n"), ["algorithm=fedprox"]))
    assert cfg.algorithm_params["mu"] == 0.2
    with pytest.raises(ConfigError, match="unknown key algorithm.nope"):
        resolve(load_raw(_write(tmp_path, "algorithm: {name: fedprox, nope: 1}\n"), []))
    with pytest.raises(ConfigError, match="rounds must be an integer"):
        resolve(load_raw(_write(tmp_path, "rounds: {name: 3}\n"), []))


def test_broken_yaml_names_the_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "rounds: 5\nlr: 0.1\nalgorithm: [ifca\nseed: 1\n")
    with pytest.raises(ConfigError, match=r"line \d+, column \d+") as err:
        load_raw(p, [])
    assert "c.yaml" in str(err.value)
    p = _write(tmp_path, "rounds: 5\n  lr: 0.1\n")
    with pytest.raises(ConfigError, match="line 2, column 5"):
        load_raw(p, [])
    proc = subprocess.run([sys.executable, "-m", "fedcluster.app.cli", "run", str(p)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "line 2" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
