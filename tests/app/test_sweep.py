"""``fedcluster sweep``: the grid's points, one ordinary run directory each, skipped when finished and resumed when
interrupted on a rerun, summarised in one table (mean ± sd over seeds, best per method) and one picture;
``fedcluster compare SWEEP_DIR`` reads it again."""

from __future__ import annotations

import csv
import json
import logging
import math
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from fedcluster.app.cli import main
from fedcluster.app.sweep.execute import Runner, SweepState
from fedcluster.app.sweep.grid import expand, parse_axes, split_values
from fedcluster.app.sweep.table import Setting, mark_best, markdown, plot
from fedcluster.errors import ConfigError
from fedcluster.metrics.statistics import mean_sd
from fedcluster.tracking.compare import RunRecord

TINY = ["rounds=2", "num_clients=6", "checkpoint_every=1"]
GRID = ["algorithm=fedavg,ifca", "lr=0.1,1e30", "seed=0,1"]  # lr=1e30 diverges in round 1
NAMES = {f"{a},lr={lr},seed={s}" for a in ("fedavg", "ifca") for lr in ("0.1", "1e30") for s in (0, 1)}


def _names(items: list[str]) -> list[str]:
    return [p.name for p in expand(None, parse_axes(items))]


def test_values_split_at_commas_outside_brackets() -> None:
    assert split_values("ifca,fedrc") == ["ifca", "fedrc"]
    assert split_values("[8,1,1],[1,1,1]") == ["[8,1,1]", "[1,1,1]"]
    assert split_values("[mlflow,tensorboard]") == ["[mlflow,tensorboard]"]


def test_the_grid_is_the_cartesian_product_with_readable_names() -> None:
    names = _names(["algorithm=ifca,fedrc", "algorithm.num_clusters=2,3", "lr=0.01,0.03", "seed=0,1,2",
                    "rounds=5"])
    assert len(names) == 2 * 2 * 2 * 3 and len(set(names)) == len(names)
    assert names[0] == "ifca,num_clusters=2,lr=0.01,seed=0" and names[-1] == "fedrc,num_clusters=3,lr=0.03,seed=2"
    points = expand(None, parse_axes(["algorithm=ifca", "algorithm.num_clusters=2,4", "seed=3"]))
    assert [p.config.algorithm_params["num_clusters"] for p in points] == [2, 4] and points[0].seed == 3
    assert points[0].setting == {"algorithm.num_clusters": "2"} and points[0].config.algorithm == "ifca"


def test_a_method_without_the_key_runs_once_per_other_setting() -> None:
    names = _names(["algorithm=fedavg,ifca", "algorithm.num_clusters=2,3,4", "seed=0,1"])
    assert names == ["fedavg,seed=0", "fedavg,seed=1", *(f"ifca,num_clusters={k},seed={s}" for k in (2, 3, 4)
                                                         for s in (0, 1))]


def test_a_config_files_parameter_that_a_method_pins_is_put_back_to_its_default(tmp_path: Path) -> None:
    config = tmp_path / "fedrc.yaml"
    config.write_text("algorithm:\n  name: fedrc\n  num_clusters: 3\nlr: 0.1\n")
    points = expand(str(config), parse_axes(["algorithm=fedavg,ifca,fedrc", "lr=0.01,0.1"]))
    k = {p.name: p.config.algorithm_params["num_clusters"] for p in points}
    assert k == {"fedavg,lr=0.01": 1, "fedavg,lr=0.1": 1, "ifca,lr=0.01": 3, "ifca,lr=0.1": 3, "fedrc,lr=0.01": 3,
                 "fedrc,lr=0.1": 3}


@pytest.mark.parametrize("items, problem", [
    (["foo=1,2"], "unknown key 'foo'"),
    (["algorithm=ifca,fedrc", "algorithm.nonexistent=1,2"], "unknown key algorithm.nonexistent"),
    (["algorithm=ifca", "algorithm.num_clusters=0,2"], "num_clusters"),
    (["lr=0.1,fast"], "lr must be a number"),
    (["out=x"], "--out"),
    (["lr=0.1,,0.2"], "empty value"),
    (["seed=0,1", "seed=2"], "given twice"),
])
def test_a_bad_key_or_value_is_refused_before_anything_runs(items: list[str], problem: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=problem):
        expand(None, parse_axes(items))
    assert main(["sweep", *items, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and problem.split()[0] in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def _record(val_acc: float, test_acc: float) -> RunRecord:
    summary = {"final": {"val_acc": val_acc, "test_acc": test_acc, "ari": 1.0, "num_clusters": 2}, "best": {},
               "wall_seconds": 1.0}
    return RunRecord(Path("x"), {}, [], summary)


def test_the_best_setting_of_each_method_has_the_highest_mean_validation_accuracy() -> None:
    settings = [Setting({"algorithm": "ifca", "lr": "0.01"}, "ifca", 2, [_record(0.5, 0.9), _record(0.7, 0.9)]),
                Setting({"algorithm": "ifca", "lr": "0.1"}, "ifca", 2, [_record(0.62, 0.1), _record(0.62, 0.1)]),
                Setting({"algorithm": "ifca", "lr": "1"}, "ifca", 2, [], diverged=2),
                Setting({"algorithm": "fedavg", "lr": "0.01"}, "fedavg", 2, [_record(0.3, 0.3)]),
                Setting({"algorithm": "fedavg", "lr": "0.1"}, "fedavg", 2, [_record(0.3, 0.2), _record(0.1, 0.2)])]
    mark_best(settings)
    assert [s.best for s in settings] == [False, True, False, True, False]  # by validation, not test accuracy
    table = markdown(settings, ["algorithm", "lr"]).splitlines()
    assert table[2] == "| ifca | 0.01 | 2/2 | 0.6000 ± 0.1414 | 0.9000 ± 0.0000 | 1.0000 ± 0.0000 | 2 ± 0 |  |"
    assert table[4].startswith("| ifca | 1 | 0/2 (2 diverged) | – |")
    assert table[5].endswith("| 0.3000 | 1.0000 | 2 | * |")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sweep") / "s"
    assert main(["sweep", *GRID, *TINY, "--workers", "2", "--out", str(folder)]) == 0
    return folder


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _final(run_dir: Path, key: str) -> float:
    return json.loads((run_dir / "summary.json").read_text())["final"][key]


def test_every_point_is_an_ordinary_run_directory(sweep: Path) -> None:
    runs = {p.name for p in sweep.iterdir() if (p / "config.yaml").is_file()}
    assert runs == NAMES
    for name in NAMES:
        cfg = yaml.safe_load((sweep / name / "config.yaml").read_text())
        assert name == f"{cfg['algorithm']},lr={'0.1' if cfg['lr'] == 0.1 else '1e30'},seed={cfg['seed']}"
        assert cfg["rounds"] == 2 and cfg["threads"] >= 1  # two runs at once share the cores
        assert (sweep / name / "summary.json").is_file() == ("1e30" not in name)  # lr=1e30 diverged
    assert (sweep / "logs" / "ifca,lr=0.1,seed=0.log").is_file()


def test_the_table_is_mean_and_sd_over_seeds_with_the_best_setting_per_method(sweep: Path) -> None:
    rows = {(r["algorithm"], r["lr"]): r for r in _csv(sweep / "sweep.csv")}
    assert set(rows) == {(a, lr) for a in ("fedavg", "ifca") for lr in ("0.1", "1e30")}
    for method in ("fedavg", "ifca"):
        good, bad = rows[(method, "0.1")], rows[(method, "1e30")]
        for key in ("val_acc", "test_acc"):
            mean, sd, _ = mean_sd([_final(sweep / f"{method},lr=0.1,seed={s}", key) for s in (0, 1)])
            assert float(good[f"final_{key}_mean"]) == pytest.approx(mean, rel=1e-5)
            assert float(good[f"final_{key}_sd"]) == pytest.approx(sd, rel=1e-4)
        assert (good["runs"], good["best"], bad["runs"], bad["diverged"], bad["best"]) == ("2", "1", "0", "2", "0")
        assert math.isnan(float(bad["final_val_acc_mean"]))
    table = (sweep / "sweep.md").read_text()
    assert "| fedavg | 0.1 | 2/2 |" in table and "0/2 (2 diverged)" in table
    assert (sweep / "sweep.png").stat().st_size > 10_000


def test_a_rerun_skips_finished_and_diverged_runs(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stamps = {n: (sweep / n / "rounds.csv").stat().st_mtime_ns for n in NAMES if (sweep / n / "rounds.csv").exists()}
    assert main(["sweep", *GRID, *TINY, "--workers", "2", "--out", str(sweep)]) == 0
    assert "8 done earlier, 0 to resume, 0 to start" in capsys.readouterr().err
    assert stamps == {n: (sweep / n / "rounds.csv").stat().st_mtime_ns for n in stamps}


def test_an_interrupted_run_resumes_from_its_checkpoint(sweep: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    name = "ifca,lr=0.1,seed=1"
    run_dir = sweep / name
    whole = _rows(run_dir)
    shutil.rmtree(run_dir)
    # the state a Ctrl-C after round 1 leaves: rounds.csv and checkpoint.pt of round 1, no summary.json
    assert main(["run", "algorithm=ifca", "lr=0.1", "seed=1", *TINY, "rounds=1", "progress=false",
                 f"out={run_dir}"]) == 0
    (run_dir / "summary.json").unlink()
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    (run_dir / "config.yaml").write_text(yaml.safe_dump({**cfg, "rounds": 2}, sort_keys=False))
    capsys.readouterr()
    assert main(["sweep", *GRID, *TINY, "--out", str(sweep)]) == 0
    assert "7 done earlier, 1 to resume, 0 to start" in capsys.readouterr().err
    commands = [line for line in (sweep / "logs" / f"{name}.log").read_text().splitlines() if line.startswith("$ ")]
    assert " fedcluster resume " in commands[-1]
    resumed = _rows(run_dir)
    assert [r["round"] for r in resumed] == ["1", "2"]
    for a, b in zip(whole, resumed, strict=True):  # the same numbers as the run that was never interrupted
        assert (a["val_acc"], a["test_acc"], a["ari"]) == (b["val_acc"], b["test_acc"], b["ari"])


def _rows(run_dir: Path) -> list[dict[str, str]]:
    return _csv(run_dir / "rounds.csv")


def test_compare_reads_a_sweep_folder(sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(sweep), "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "| ifca | 0.1 | 2/2 |" in out and "best" in out
    assert _csv(tmp_path / "c" / "sweep.csv") == _csv(sweep / "sweep.csv")
    assert (tmp_path / "c" / "sweep.png").is_file()


def test_a_folder_with_a_run_of_other_settings_is_refused(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", *GRID, "rounds=2", "num_clients=7", "--out", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "num_clients=6" in err and "num_clients=7" in err and "--out" in err and len(err.strip().splitlines()) == 1
    assert main(["sweep", *GRID, "rounds=1", "num_clients=6", "--out", str(sweep)]) == 2  # fewer rounds: refused
    err = capsys.readouterr().err
    assert "rounds=2" in err and "rounds=1" in err and len(err.strip().splitlines()) == 1


def _without_times(run_dir: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if "second" not in k and "time" not in k} for row in _rows(run_dir)]


def test_the_runs_of_one_worker_equal_runs_in_fresh_processes(sweep: Path, tmp_path: Path) -> None:
    """Each worker ran four points one after the other: the last equals the same run in a process of its own."""
    name = "ifca,lr=0.1,seed=1"
    subprocess.run([sys.executable, "-m", "fedcluster", "run", "algorithm=ifca", "lr=0.1", "seed=1", *TINY,
                    "progress=false", f"out={tmp_path / 'alone'}"], check=True, capture_output=True)
    assert _without_times(sweep / name) == _without_times(tmp_path / "alone")
    assert len(_rows(sweep / name)) == 2


def test_more_rounds_extend_the_finished_runs_in_place(sweep: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "s"
    shutil.copytree(sweep, copy)
    capsys.readouterr()
    assert main(["sweep", *GRID, "num_clients=6", "checkpoint_every=1", "rounds=3", "--out", str(copy)]) == 0
    err = capsys.readouterr().err
    assert "4 done earlier, 0 to resume, 0 to start, 4 to extend to more rounds" in err  # the diverged 4 stay
    assert "[1/4] " in err and " left" in err and "[4/4] " in err
    assert main(["run", "algorithm=fedavg", "lr=0.1", "seed=0", *TINY, "rounds=3", "progress=false",
                 f"out={tmp_path / 'straight'}"]) == 0
    extended = copy / "fedavg,lr=0.1,seed=0"
    assert len(_rows(extended)) == 3 and _without_times(extended) == _without_times(tmp_path / "straight")
    assert json.loads((extended / "summary.json").read_text())["rounds"] == 3
    assert "extend" not in Path(copy / "sweep.md").read_text()


def test_a_method_without_finished_runs_draws_without_a_warning(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    settings = [Setting({"algorithm": "ifca", "lr": "0.1"}, "ifca", 1, [_record(0.5, 0.5)]),
                Setting({"algorithm": "fedavg", "lr": "0.1"}, "fedavg", 1, [])]  # interrupted before it finished
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")
        plot(settings, ["algorithm", "lr"], tmp_path / "p.png", "t")
    assert (tmp_path / "p.png").is_file() and not caplog.records



def test_an_interrupted_run_is_said_to_resume_only_when_it_has_a_checkpoint(tmp_path: Path) -> None:
    point = expand(None, parse_axes(["rounds=2"]))[0]
    (tmp_path / point.name).mkdir()
    runner = Runner(tmp_path, None, SweepState(tmp_path), 1, None)
    before = runner._outcome(point, 130, 1.0, tmp_path / "log")
    (tmp_path / point.name / "checkpoint.pt").write_bytes(b"")
    after = runner._outcome(point, 130, 1.0, tmp_path / "log")
    assert before.status == after.status == "interrupted"
    assert "checkpoint" not in before.note.replace("no checkpoint", "") and "starts again" in before.note
    assert "resumes from its checkpoint" in after.note
