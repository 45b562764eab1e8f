"""What a newcomer reads in passing says what it means: the Ctrl-C line after one round, the scenario summary's
parameters as they are written on the command line, and `list NAME` pointing to where tiers are explained."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.tracking.run_dir import RunDir, rounds_span

ROOT = Path(__file__).resolve().parents[2]


def test_a_round_span_of_one_round_is_one_round() -> None:
    assert rounds_span(1, 1) == "round 1" and rounds_span(1, 4) == "rounds 1-4" and rounds_span(3, 3) == "round 3"


def test_ctrl_c_after_the_first_round_names_round_1(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch, terminal_ctrl_c: None) -> None:
    append = RunDir.append_round

    def then_ctrl_c(self: RunDir, payload: dict) -> None:
        append(self, payload)
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(RunDir, "append_round", then_ctrl_c)
    assert main(["run", "num_clients=6", "progress=false", "model.hidden=[16]", "device=cpu", "rounds=5",
                 f"out={tmp_path / 'run'}"]) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "interrupted in round 2; round 1 is in" in line and "rounds 1-1" not in line, line


def test_the_scenario_summary_writes_values_as_the_command_line_does(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    assert main(["scenario", "concept-swap", "num_clients=6", "--out", str(tmp_path / "s.png")]) == 0
    (parameters,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  parameters:")]
    assert "None" not in parameters and "image_size=null" in parameters, parameters


def test_list_points_to_where_tiers_are_explained(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "fedrc"]) == 0
    text = capsys.readouterr().out
    assert "tier 1" in text and "docs/extending.md" in text
    assert "## How a method is put together" in (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    assert main(["list", "fedavg"]) == 0
    assert "docs/extending.md" not in capsys.readouterr().out  # no tiers named, no pointer
