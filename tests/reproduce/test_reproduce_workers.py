"""``fedcluster reproduce --workers N``: parts (one seed's runs of one setting) in worker processes, every record
stored as it arrives, the same results as one worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.reproduce.experiments import get
from fedcluster.reproduce.parallel import Part, next_part, parts, run_parts


def test_every_finished_record_arrives_before_a_workers_error_is_raised() -> None:
    got: list[dict] = []
    todo = {0: set(), 1: set(), 2: {("", "cflgp")}}  # seed 2 already has its cflgp record
    with pytest.raises(RuntimeError, match="seed 1 failed"):
        run_parts("tests.support.reproduce_fake_runner:fake_run", "s3-merge", "small", parts(get("s3-merge"), todo),
                  ["a=1"], got.append, 2)
    pairs = sorted((r["seed"], r["method"]) for r in got)
    methods = ["cfl (MADMO)", "cflgp", "fedavg", "ifca"]
    assert [m for s, m in pairs if s == 0] == methods  # seed 0: every method
    assert [m for s, m in pairs if s == 1] == ["cflgp"]  # seed 1: the record before its error
    assert [m for s, m in pairs if s == 2] == [m for m in methods if m != "cflgp"]  # seed 2: what it lacked
    assert all(r["metrics"]["t"] == 1.0 for r in got)  # the extra overrides reach the runner


def test_a_worker_runs_one_setting_of_one_seed() -> None:
    exp = get("s3-mixture-kappa")  # 3 settings (κ)
    settings = [s.name for s in exp.settings]
    got: list[dict] = []
    todo = {0: {(settings[0], exp.methods[0].label)}, 2: set()}  # seed 0 has one record stored
    split = parts(exp, todo)
    assert [(p.seed, p.setting) for p in split] == [(s, k) for s in (0, 2) for k in settings]
    assert split[0].left == len(exp.methods) - 1 and split[1].left == len(exp.methods)
    run_parts("tests.support.reproduce_fake_runner:fake_run", exp.name, "small", split, [], got.append, 3)
    assert all(len(r["calls"]) == 1 for r in got)  # every runner call ran one setting only
    keys = sorted((r["seed"], r["setting"], r["method"]) for r in got)
    want = sorted((s, k, m.label) for s in (0, 2) for k in settings for m in exp.methods)
    assert keys == [w for w in want if w != (0, settings[0], exp.methods[0].label)]  # each missing one, once


def test_parts_go_out_untimed_settings_first_then_the_dearest() -> None:
    a, b, c = Part(0, "a", frozenset(), 2), Part(0, "b", frozenset(), 1), Part(1, "c", frozenset(), 3)
    assert next_part([a, b, c], {"a": [5.0], "b": [1.0]}) == c  # c's setting has no timed record yet
    assert next_part([a, b, c], {"a": [5.0], "b": [1.0], "c": [1.0]}) == a  # 2 × 5 s
    assert next_part([a, b, c], {"a": [1.0], "b": [1.0], "c": [2.0, 4.0]}) == c  # 3 × 3 s
    assert next_part([b, a], {}) == b  # nothing timed: the given order


def _records(out: Path) -> dict[tuple[int, str, str], dict]:
    data = json.loads((out / "s3-lines-sweeps.json").read_text())
    return {(r["seed"], r["setting"], r["method"]): (r["metrics"], r["curve"]) for r in data["records"]}


@pytest.mark.host_only(reason="its worker processes run outside the simulated accelerator (the device it picks "
                               "for them, cuda, is not in the CPU-only processes)")
def test_two_workers_give_the_records_of_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["reproduce", "s3-lines-sweeps", "--budget", "tiny", "--seeds", "2", "--set", "threads=1"]
    assert main([*base, "--out", str(tmp_path / "one" / "p")]) == 0
    progress = capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "two" / "p"), "--workers", "2"]) == 0
    one, two = _records(tmp_path / "one" / "p"), _records(tmp_path / "two" / "p")
    assert len(one) > 2 and {s for s, _, _ in one} == {0, 1}
    assert one == two
    n = len(one)  # every record's line counts the runs done of all the command asked for
    assert f"; 1 of {n} runs)" in progress and f"; {n} of {n} runs)" in progress
    assert f"; {n} of {n} runs)" in capsys.readouterr().err


def test_workers_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "s3-lines-sweeps", "--workers", "0"]) == 2
    assert "--workers 0: give at least 1" in capsys.readouterr().err
