"""``fedcluster reproduce NAME --estimate``: a budget's need measured by timing a few rounds of every run, scaled to
the budget's rounds and evaluations, and quoted on the page only while it matches the experiment's protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.errors import UserError
from fedcluster.reproduce.estimate import TIMED_ROUNDS, Estimate, RunCost, cost_of, evaluations, matching
from fedcluster.reproduce.experiments import EXPERIMENTS
from fedcluster.reproduce.pages import paper_budget_line
from fedcluster.reproduce.results import Stored


def test_evaluations_count_every_eval_every_th_round_and_the_last() -> None:
    assert evaluations(200, 1) == 200
    assert evaluations(200, 10) == 20
    assert evaluations(400, 5) == 80
    assert evaluations(7, 5) == 2  # rounds 5 and 7
    assert evaluations(3, 10) == 1  # the last round only


def test_a_run_cost_is_its_fixed_part_plus_rounds_and_evaluations() -> None:
    # 4 timed rounds: the first warms up, the last also evaluates (1.9 s when timed again)
    cost = cost_of("", "ifca", ["rounds=200", "eval_every=1", "eval_every=10"], 200, wall=12.0,
                   seconds=[5.0, 1.0, 1.2, 3.0], evaluation=1.9)
    assert cost.fixed == pytest.approx(12.0 - 10.2)
    assert cost.train_round == pytest.approx((1.0 + 1.2 + 1.1) / 3)
    assert cost.evaluation == pytest.approx(1.9)
    assert cost.evaluations == 20  # the last eval_every wins
    assert cost.seconds == pytest.approx(1.8 + 200 * 1.1 + 20 * 1.9)


def test_wall_time_with_workers_list_schedules_the_runs_dearest_first() -> None:
    runs = [RunCost("C=8", "a", 0.0, 1.0, 0.0, 0, 360), RunCost("C=8", "b", 0.0, 1.0, 0.0, 0, 360),
            RunCost("C=16", "a", 0.0, 1.0, 0.0, 0, 1800)]  # runs of 360 s (C=8) and 1800 s (C=16), 3 seeds each
    found = Estimate("x", "paper", "", [], "", build=0.0, runs=runs)
    assert found.wall_hours(3, 1) == pytest.approx(found.cpu_hours(3))
    # 2 workers: 1800 | 1800, the third 1800 onto one, then five 360 s runs onto the other and the last onto either
    assert found.wall_hours(3, 2) == pytest.approx((1800 + 6 * 360) / 3600)
    assert found.wall_hours(3, 6) == pytest.approx(1800 / 3600)  # no more than the dearest run
    assert found.wall_hours(1, 3) == pytest.approx(1800 / 3600)  # one seed: its runs side by side, not one part


def _stored_small(name: str) -> Stored:
    stored = Stored(name, "small", 3, "cpu", ["threads=1"], finished=True, wall_seconds=600.0)
    return stored


def test_the_page_quotes_a_measured_need_only_under_the_current_protocol(tmp_path: Path) -> None:
    exp = EXPERIMENTS["s3-rotation-8-sweep"]
    found = Estimate(exp.name, "paper", exp.protocol("paper"), ["threads=1"], "2026-01-01", build=30.0,
                     runs=[RunCost("C=8", "ifca K=4", 2.0, 1.0, 2.0, 20, 200)])
    found.save(tmp_path / f"{exp.name}.estimate.json")
    assert found.cpu_hours() == pytest.approx(3 * (30.0 + 2.0 + 200 + 40) / 3600)
    line = " ".join(paper_budget_line(exp, _stored_small(exp.name), tmp_path))
    assert "Measured need: about 14 CPU minutes for 3 seeds" in line and "a CPU can run it" in line
    assert "ifca K=4 at C=8" in line and "--budget paper --estimate" in line
    assert "load average" not in line  # not recorded: nothing said
    found.load_average = 3.0
    found.save(tmp_path / f"{exp.name}.estimate.json")
    assert "with a load average of 3.0 a core" in " ".join(paper_budget_line(exp, _stored_small(exp.name), tmp_path))
    found.protocol = "protocol {}"  # measured under another protocol: not quoted
    found.save(tmp_path / f"{exp.name}.estimate.json")
    assert matching(tmp_path / f"{exp.name}.estimate.json", exp, "paper") is None
    assert "Computed need" in " ".join(paper_budget_line(exp, _stored_small(exp.name), tmp_path))
    (tmp_path / f"{exp.name}.estimate.json").write_text("[1, 2]")  # not an estimate: ignored
    assert "Computed need" in " ".join(paper_budget_line(exp, _stored_small(exp.name), tmp_path))


def test_estimate_times_every_setting_and_method(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "s3-rotation-8"
    assert main(["reproduce", name, "--budget", "tiny", "--estimate", "--out", str(tmp_path), "--set",
                 "threads=1"]) == 0
    raw = json.loads((tmp_path / f"{name}.estimate.json").read_text())
    exp = EXPERIMENTS[name].trimmed("tiny")
    assert {(r["setting"], r["method"]) for r in raw["runs"]} == {
        (s.name, m.label) for s in exp.settings for m in exp.methods if s.runs(m)}
    assert all(r["rounds"] == 2 and r["train_round"] > 0 and r["evaluation"] > 0 and r["fixed"] >= 0
               for r in raw["runs"])
    assert raw["protocol"] == exp.protocol("tiny") and TIMED_ROUNDS > 2
    printed = capsys.readouterr().out
    assert "CPU hours for 3 seed(s)" in printed
    assert main(["reproduce", name, "--budget", "tiny", "--estimate", "--out", str(tmp_path), "--set", "threads=1",
                 "--workers", "2"]) == 0
    assert "with --workers 2: about" in capsys.readouterr().out


def test_estimate_says_what_it_times_before_it_times_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "s3-rotation-8"
    assert main(["reproduce", name, "--budget", "tiny", "--estimate", "--out", str(tmp_path), "--set",
                 "threads=1"]) == 0
    lines = capsys.readouterr().err.splitlines()
    exp = EXPERIMENTS[name].trimmed("tiny")
    total = sum(s.runs(m) for s in exp.settings for m in exp.methods)
    assert lines[0].startswith(f"{name}: timing {total} run(s) over {TIMED_ROUNDS} rounds")
    starts = [i for i, line in enumerate(lines) if "] timing " in line]
    assert [lines[i].split("]")[0] for i in starts] == [f"[{n}/{total}" for n in range(1, total + 1)]
    assert all("a round" in lines[i + 1] for i in starts)  # each start is followed by that run's measurement
    assert any(line.startswith("building the federation") for line in lines[:starts[0]])


def test_a_deeply_nested_or_huge_estimate_file_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from fedcluster.reproduce import estimate

    exp = EXPERIMENTS["s3-rotation-8-sweep"]
    path = tmp_path / f"{exp.name}.estimate.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    _stored_small(exp.name).save(tmp_path / f"{exp.name}.json")
    assert main(["reproduce", exp.name, "--report-only", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested more deeply than an estimate" in err and "Traceback" not in err
    path.write_text('{"name": "[[[[[[[[[[[[", "runs": []}')  # brackets inside a string are not nesting
    assert estimate.nesting(path.read_text()) == 2
    monkeypatch.setattr(estimate, "MAX_BYTES", 10)
    with pytest.raises(UserError, match="larger or nested more deeply"):
        Estimate.load(path)
