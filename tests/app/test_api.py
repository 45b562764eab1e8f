"""The library API (fedcluster.run / build_federation / load_config) and the demo it powers."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fedcluster
from fedcluster.app.cli import main
from fedcluster.app.demo import run_demo
from fedcluster.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"num_clients": 6, "rounds": 3, "progress": False, "model": {"name": "mlp", "hidden": [16]}}


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


def test_import_fedcluster_stays_light() -> None:
    code = "import sys, fedcluster; print('torch' in sys.modules, callable(fedcluster.run))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"]


def test_run_returns_rows_summary_and_the_same_run_as_the_cli(tmp_path: Path) -> None:
    res = fedcluster.run(SMALL, algorithm={"name": "ifca", "num_clusters": 2}, out=str(tmp_path / "api"))
    assert isinstance(res, fedcluster.Result) and res.run_dir == tmp_path / "api"
    assert [r["round"] for r in res.rows] == [1.0, 2.0, 3.0]
    assert res.summary["final"]["test_acc"] == pytest.approx(res.rows[-1]["test_acc"], abs=1e-6)
    assert res.config.algorithm_params["num_clusters"] == 2
    assert main(["run", "num_clients=6", "rounds=3", "progress=false", "model=mlp", "model.hidden=[16]",
                 "algorithm=ifca", "algorithm.num_clusters=2", f"out={tmp_path / 'cli'}"]) == 0
    assert _csv(tmp_path / "api" / "rounds.csv") == _csv(tmp_path / "cli" / "rounds.csv")


def test_build_federation_then_run_on_it_with_dotted_overrides(tmp_path: Path) -> None:
    fed = fedcluster.build_federation({"scenario": "label-skew", "num_clients": 5}, **{"scenario.alpha": 0.3})
    assert fed.num_clients == 5 and fed.info["alpha"] == 0.3
    res = fedcluster.run({**SMALL, "scenario": "label-skew", "scenario.alpha": 0.3}, federation=fed,
                         out=str(tmp_path / "r"))
    assert len(res.rows) == 3 and res.summary["federation"] == fed.summary()


def test_api_mistakes_raise_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'roundz'"):
        fedcluster.load_config(roundz=3)
    with pytest.raises(ConfigError, match="does not exist"):
        fedcluster.run(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="YAML path, a mapping or None"):
        fedcluster.load_config(42)  # type: ignore[arg-type]


def _demo_block(page: Path) -> str:
    """The output block a page shows under its ``<!-- demo-output`` marker."""
    text = page.read_text(encoding="utf-8")
    start = text.index("```\n", text.index("<!-- demo-output")) + 4
    return text[start:text.index("```", start)]


def _comparable(output: str) -> str:
    """Demo output without what varies between runs: the seconds column and the run folder."""
    output = re.sub(r"^(\S+(?: +[-\d.]+){4}) +[\d.]+$", r"\1", output, flags=re.M)
    return re.sub(r"fedcluster report \S+", "fedcluster report RUN_DIR", output)


def test_demo_shows_clustering_beating_one_model(tmp_path: Path, capsys) -> None:
    assert run_demo(str(tmp_path / "demo"), progress=False) == 0
    out = capsys.readouterr().out
    if not torch.cuda.is_available():  # the pages show the CPU's figures (the demo runs on device=auto)
        for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
            assert _comparable(_demo_block(page)) == _comparable(out), page
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[1:3]}
    fedavg, cfl = rows["fedavg"], rows["cfl"]  # val acc, test acc, ARI, clusters, seconds
    assert fedavg[3] == "1" and cfl[3] == "3" and float(cfl[2]) == 1.0
    assert float(cfl[1]) > float(fedavg[1]) + 0.3
    assert f"fedcluster report {tmp_path / 'demo' / 'cfl'}" in out
    assert main(["report", str(tmp_path / "demo" / "cfl")]) == 0
    assert (tmp_path / "demo" / "cfl" / "clusters.png").is_file()


def test_demos_started_in_the_same_second_get_their_own_folders(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Default demo folders: runs/<time>-demo, then -2, ...; a demo that fails before writing leaves none."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fedcluster.storage.folders.stamp", lambda: "20250101-120000")
    roots: list[Path] = []

    def fake_demo(root: Path, progress: bool) -> int:  # the two runs' folders, without training
        roots.append(root)
        for method in ("fedavg", "cfl"):
            assert not (root / method).exists()
            (root / method).mkdir(parents=True)
        return 0

    monkeypatch.setattr("fedcluster.app.demo._demo", fake_demo)
    assert run_demo() == 0 and run_demo() == 0
    assert roots == [Path("runs/20250101-120000-demo"), Path("runs/20250101-120000-demo-2")]
    monkeypatch.setattr("fedcluster.app.demo._demo", lambda root, progress: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        run_demo()
    assert sorted(Path("runs").iterdir()) == roots


def test_run_without_arguments_is_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr("fedcluster.app.demo.run_demo", lambda out=None, progress=True: calls.append(out) or 0)
    assert main(["run"]) == 0 and main(["demo", "--out", "x"]) == 0
    assert calls == [None, "x"]
