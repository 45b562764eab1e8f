"""``fedcluster scenario ...``: summary on stdout, a PNG on disk, one clear line and exit 2 on mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedcluster.app.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDCLUSTER_CACHE", str(tmp_path / "cache"))


def test_scenario_prints_summary_and_writes_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pics" / "ds.png"
    args = ["scenario", "diverse-shift", "num_clients=20", "data_seed=5", "scenario.alpha=0.5", "--out", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert text.startswith("built in")
    for words in ("diverse-shift: 20 clients", "clients per concept: 0:10, 1:5, 2:5", "clients per style:",
                  "label map of concept 1: [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]", "label counts", "alpha=0.5"):
        assert words in text
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert main(args) == 0  # second time: from the cache
    assert capsys.readouterr().out.startswith("loaded from cache")


def test_scenario_default_picture_name_and_synthetic_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "mixed-regression", "scenario.config=A", "scenario.d=10"]) == 0
    text = capsys.readouterr().out
    assert "mixed-regression: 200 clients" in text and "‖θ*‖ per cluster" in text
    assert (tmp_path / "runs/scenarios/mixed-regression-mixed-regression.png").read_bytes()[:8] == PNG_MAGIC
    assert main(["scenario", "rotation", "num_clients=8", "scenario.angles=[0,90]"]) == 0
    assert "clients per style: rot0:4, rot90:4" in capsys.readouterr().out
    assert (tmp_path / "runs/scenarios/rotation-digits.png").is_file()
    assert not list(tmp_path.glob("*.png"))  # nothing lands in the current directory


@pytest.mark.parametrize("args, words", [
    (["scenario", "mixture", "scenario.kappa=2"], "kappa must be in [0, 1]"),
    (["scenario", "concept-swap", "scenario.foo=1"], "unknown key scenario.foo"),
    (["scenario", "nope"], "unknown scenario 'nope'"),
    (["scenario", "rotation", "num_clients=3"], "8 angles need at least 8 clients"),
    (["scenario", "iid", "dataset=mnist"], "data_dir="),
])
def test_scenario_bad_input_exits_2(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fedcluster: error:") and words in err and err.count("\n") == 1
