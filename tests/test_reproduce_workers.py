"""``fedcluster reproduce --workers N``: seeds in worker processes, every record stored as it arrives, the same
results as one worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.reproduce.parallel import run_seeds


def test_every_finished_record_arrives_before_a_workers_error_is_raised() -> None:
    got: list[dict] = []
    todo = {0: set(), 1: set(), 2: {("", "cflgp")}}  # seed 2 already has its cflgp record
    with pytest.raises(RuntimeError, match="seed 1 failed"):
        run_seeds("reproduce_fake_runner:fake_run", "s3-merge", "small", todo, ["a=1"], got.append, 2)
    pairs = sorted((r["seed"], r["method"]) for r in got)
    methods = ["cfl (MADMO)", "cflgp", "fedavg", "ifca"]
    assert [m for s, m in pairs if s == 0] == methods  # seed 0: every method
    assert [m for s, m in pairs if s == 1] == ["cflgp"]  # seed 1: the record before its error
    assert [m for s, m in pairs if s == 2] == [m for m in methods if m != "cflgp"]  # seed 2: what it lacked
    assert all(r["metrics"]["t"] == 1.0 for r in got)  # the extra overrides reach the runner


def _records(out: Path) -> dict[tuple[int, str, str], dict]:
    data = json.loads((out / "s3-lines-sweeps.json").read_text())
    return {(r["seed"], r["setting"], r["method"]): (r["metrics"], r["curve"]) for r in data["records"]}


def test_two_workers_give_the_records_of_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["reproduce", "s3-lines-sweeps", "--budget", "tiny", "--seeds", "2", "--set", "threads=1"]
    assert main([*base, "--out", str(tmp_path / "one" / "p")]) == 0
    assert main([*base, "--out", str(tmp_path / "two" / "p"), "--workers", "2"]) == 0
    one, two = _records(tmp_path / "one" / "p"), _records(tmp_path / "two" / "p")
    assert len(one) > 2 and {s for s, _, _ in one} == {0, 1}
    assert one == two
    capsys.readouterr()


def test_workers_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "s3-lines-sweeps", "--workers", "0"]) == 2
    assert "--workers 0: give at least 1" in capsys.readouterr().err
