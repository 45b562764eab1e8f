"""``fedcluster benchmark``: --list names the taxonomy and the methods; a tiny budget runs end to end in a temporary
folder; the same command again trains nothing and writes the same page byte for byte; a time limit stops it and the
same command continues; a user's registered method joins with one flag; bad input is one line, exit 2."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.reproduce import run_suite

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "my_method.py"


def _command(tmp: Path, *more: str) -> list[str]:
    return ["benchmark", "--budget", "tiny", "--methods", "ifca,fedavg", "--scenarios", "concept-shift,rotation",
            "--seeds", "1", "--out", str(tmp / "bench"), "--store", str(tmp / "store"), *more]


def _records(tmp: Path) -> list[dict]:
    return json.loads((tmp / "bench" / "records.json").read_text())["records"]


def test_list_names_every_scenario_of_the_taxonomy_and_every_method(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["benchmark", "--list"]) == 0
    out = capsys.readouterr().out
    for scenario in ("label-skew", "feature-shift", "concept-shift", "rotation", "diverse-mix", "label-noise",
                     "mixed-regression", "concept-drift"):
        assert scenario in out
    for method in ALGORITHMS.names():
        assert f"  {method} " in out
    assert "[num_clusters = true K]" in out and "[defaults]" in out


def test_a_tiny_budget_runs_end_to_end_and_the_same_command_trains_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(_command(tmp_path)) == 0
    page = (tmp_path / "bench" / "benchmark.md").read_text()
    assert "### concept-shift" in page and "### rotation" in page and "| ifca | num_clusters = true K |" in page
    assert "Which method for which shift" in page and (tmp_path / "bench" / "heatmap.png").stat().st_size > 1000
    records = _records(tmp_path)
    assert len(records) == 4 and {r["status"] for r in records} == {"ok"}
    k = {r["setting"]: r["metrics"]["k"] for r in records if r["method"] == "ifca"}
    assert k == {"concept-shift": 3.0, "rotation": 4.0}  # fixed-K methods at the scenario's true K
    png = (tmp_path / "bench" / "heatmap.png").read_bytes()

    def no_training(*args):  # type: ignore[no-untyped-def]
        raise AssertionError("a stored run was trained again")

    monkeypatch.setattr(run_suite, "execute", no_training)
    (tmp_path / "bench" / "records.json").unlink()  # even without the records: every run comes from the store
    assert main(_command(tmp_path)) == 0
    assert (tmp_path / "bench" / "benchmark.md").read_text() == page
    assert (tmp_path / "bench" / "heatmap.png").read_bytes() == png
    assert main(_command(tmp_path, "--report-only")) == 0
    assert (tmp_path / "bench" / "benchmark.md").read_text() == page


def test_a_time_limit_stops_it_and_the_same_command_continues(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real, calls = run_suite.execute, [0]

    def second_run_outlasts_the_limit(*args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 2:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            time.sleep(30)
        return real(*args)

    monkeypatch.setattr(run_suite, "execute", second_run_outlasts_the_limit)
    t0 = time.monotonic()
    assert main(_command(tmp_path, "--time-limit", "10")) == 0
    assert time.monotonic() - t0 < 25
    assert len(_records(tmp_path)) == 1
    assert "limit stopped it with 1 of 4 runs" in capsys.readouterr().err
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    monkeypatch.setattr(run_suite, "execute", real)
    assert main(_command(tmp_path)) == 0
    assert len(_records(tmp_path)) == 4
    assert "4 runs with numbers of 4" in (tmp_path / "bench" / "benchmark.md").read_text()


def test_a_registered_method_joins_the_table_with_one_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ALGORITHMS, "_entries", dict(ALGORITHMS._entries))  # the registration ends with the test
    try:
        assert main(["benchmark", "--list", "--plugin", str(EXAMPLE)]) == 0
        assert "  tempered-em " in capsys.readouterr().out
        assert main(["benchmark", "--budget", "tiny", "--scenarios", "concept-shift", "--seeds", "1",
                     "--methods", "tempered-em", "--plugin", str(EXAMPLE), "--out", str(tmp_path / "bench"),
                     "--store", str(tmp_path / "store")]) == 0
        assert "| tempered-em | num_clusters = true K |" in (tmp_path / "bench" / "benchmark.md").read_text()
    finally:
        sys.modules.pop(f"fedcluster_plugin_{EXAMPLE.stem}", None)


@pytest.mark.parametrize("bad, names", [(["--methods", "ifac"], "did you mean 'ifca'"),
                                        (["--scenarios", "rotations"], "did you mean 'rotation'"),
                                        (["--seeds", "0"], "--seeds 0"),
                                        (["--publish"], "--publish with --budget tiny"),
                                        (["--plugin", "no_such_module_here"], "--plugin no_such_module_here")])
def test_bad_input_is_one_line_and_exit_status_2(bad: list[str], names: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["benchmark", "--budget", "tiny", "--out", str(tmp_path / "b"), *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and names in err and err.startswith("fedcluster: error:")
    assert not (tmp_path / "b").exists()


def test_a_method_that_refuses_a_scenario_is_n_a_with_its_one_line(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # FedRC's C_{y,k} divides by label counts, which a regression has none of: a refusal, not an IndexError
    assert main(["run", "dataset=mixed-regression", "scenario=mixed-regression", "model=linear-nobias",
                 "algorithm=fedrc-adaptive", "rounds=1", "scenario.config=custom", "scenario.k=2", "scenario.d=4",
                 "scenario.sizes=20x6", f"out={tmp_path / 'run'}", "progress=false"]) == 2
    assert "label counts" in capsys.readouterr().err
    assert main(["benchmark", "--budget", "tiny", "--methods", "fedrc", "--scenarios", "mixed-regression",
                 "--seeds", "1", "--out", str(tmp_path / "bench"), "--store", str(tmp_path / "store")]) == 0
    assert [r["status"] for r in _records(tmp_path)] == ["n/a"]
    page = (tmp_path / "bench" / "benchmark.md").read_text()
    assert "n/a (the method refuses this scenario): fedrc (algorithm=fedrc: formulation=fedrc-ratio" in page


def test_choose_k_keeps_the_k_of_best_validation_accuracy(tmp_path: Path) -> None:
    assert main(["benchmark", "--budget", "tiny", "--methods", "ifca", "--scenarios", "concept-shift", "--seeds", "1",
                 "--choose-k", "--out", str(tmp_path / "bench"), "--store", str(tmp_path / "store")]) == 0
    (record,) = _records(tmp_path)
    from fedcluster.benchmark.methods import CHOOSE_K
    from fedcluster.reproduce.run_store import RunStore

    store = RunStore(tmp_path / "store")
    runs = [store.get(key) for key in sorted(store.keys())]
    assert len(runs) == len(CHOOSE_K)  # one run per K tried, the kept one of best final validation accuracy
    best = max(r.summary["final"]["val_acc"] for r in runs if r is not None)
    assert record["metrics"]["local"] == pytest.approx(100 * best)
    assert record["k_chosen"] in CHOOSE_K
    assert f"| ifca | by validation ({record['k_chosen']}) |" in (tmp_path / "bench" / "benchmark.md").read_text()


def test_a_one_concept_scenario_reads_the_final_k_not_the_ari() -> None:
    """Where every client shares one concept the ARI is 0 for every method (one true cluster): the summary names
    how many methods keep one cluster instead of a "best ARI", and the table shows no ARI."""
    from fedcluster.benchmark.results_page import scenario_table, summary_lines
    from fedcluster.benchmark.table import Cell
    from fedcluster.benchmark.taxonomy import TAXONOMY

    one = next(s for s in TAXONOMY if s.name == "label-skew")
    many = next(s for s in TAXONOMY if s.name == "concept-shift")
    assert one.one_concept and not many.one_concept

    def cell(k: float, acc: float) -> Cell:
        return Cell(2, {"global": [acc, acc + 1], "local": [acc, acc], "ari": [0.0, 0.0], "k": [k, k]}, {"ok": 2})

    row = {"fedavg": cell(1.0, 80.0), "ifca": cell(3.0, 70.0)}
    lines = summary_lines({one.name: row, many.name: row}, {one.name: one.task, many.name: many.task},
                          {one.name: one.shift, many.name: many.shift}, frozenset({one.name}))
    assert "1 of 2 methods keep one cluster" in lines[0] and "Best ARI" not in lines[0]
    assert "Best ARI" in lines[1]
    from fedcluster.benchmark.methods import BenchMethod

    methods = {"fedavg": BenchMethod("fedavg", None, ""), "ifca": BenchMethod("ifca", "num_clusters", "")}
    table = scenario_table(one, row, methods, choose_k=False)
    assert all(line.split(" | ")[4] == "–" for line in table[2:4]) and "ARI is not defined" in "\n".join(table)
    assert scenario_table(many, row, methods, choose_k=False)[2].split(" | ")[4] == "0.00 ± 0.00"


def test_the_oracle_is_a_reference_shown_but_never_ranked(tmp_path: Path) -> None:
    command = ["benchmark", "--budget", "tiny", "--methods", "oracle,fedavg", "--scenarios", "concept-shift",
               "--seeds", "1", "--out", str(tmp_path / "bench"), "--store", str(tmp_path / "store")]
    assert main(command) == 0
    text = (tmp_path / "bench" / "benchmark.md").read_text()
    summary = text.split("### Which method for which shift", 1)[1].split("### concept-shift", 1)[0]
    assert "best global accuracy: **fedavg**" in summary
    assert "Lowest mean rank over the scenarios (of the methods that run every one): fedavg" in summary
    assert "leave out oracle" in summary and "| oracle (reference) |" in text


def test_publishing_never_replaces_a_page_that_holds_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    page = tmp_path / "docs" / "benchmark.md"
    page.write_text("# x\n\nBudget `default`, 3 seed(s), 35 methods × 8 scenarios: 785 runs with numbers of 840.\n")
    assert main(["benchmark", "--publish", "--seeds", "1", "--methods", "fedavg", "--scenarios", "rotation"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds the default budget with 3 seed(s), 35 methods and 8 scenarios" in err[0]
    assert "Budget `default`, 3 seed(s)" in page.read_text()
