"""Experiment tracking against the real thing: a tiny run logs to MLflow (its recommended local SQLite store)
and TensorBoard, and MLflow's own client and TensorBoard's EventAccumulator read the logs back."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import json
import math
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml

from fedcluster.app.cli import main
from fedcluster.tracking.loggers import Tracking

FAST = ["num_clients=8", "rounds=3", "progress=false", "algorithm=ifca"]
# MLflow is an optional extra (fedcluster[tracking]): the tests that log to it need it installed
MLFLOW = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="needs mlflow (fedcluster[tracking])")
TENSORBOARD = pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                                 reason="needs tensorboard (fedcluster[tracking])")


def _rows(run_dir: Path) -> list[dict[str, float]]:
    with (run_dir / "rounds.csv").open() as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _expected(rows: list[dict[str, float]], column: str) -> list[tuple[int, float]]:
    """(round, value) of one rounds.csv column, rounds without a value (not evaluated) left out."""
    return [(int(r["round"]), r[column]) for r in rows if not math.isnan(r[column])]


def _mlflow(store_dir: Path):  # noqa: ANN202 - MLflow's client type
    """A client of the SQLite store in ``store_dir`` (by default, the folder that holds the run directories)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{store_dir / 'mlflow.db'}")


def _runs(client, experiment: str = "fedcluster") -> list:  # noqa: ANN001
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


@pytest.fixture(scope="module")
def mlflow_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mlflow") / "run"
    assert main(["run", *FAST, f"out={out}", "tracking=mlflow", "tracking_experiment=tiny"]) == 0
    return out


@MLFLOW
def test_mlflow_params_are_the_resolved_config(mlflow_run: Path) -> None:
    [run] = _runs(_mlflow(mlflow_run.parent), "tiny")
    params = run.data.params
    cfg = yaml.safe_load((mlflow_run / "config.yaml").read_text())
    assert params["algorithm"] == "ifca" and params["rounds"] == "3" and params["num_clients"] == "8"
    assert params["lr"] == str(cfg["lr"]) and params["tracking"] == '["mlflow"]'
    flat = {f"{k[:-7]}.{sub}" if k.endswith("_params") else k: v
            for k, section in cfg.items() for sub, v in (section.items() if k.endswith("_params") else [(k, section)])}
    assert params == {k: v if isinstance(v, str) else json.dumps(v) for k, v in flat.items()}
    assert any(k.startswith("algorithm.") for k in params) and any(k.startswith("scenario.") for k in params)
    assert run.info.status == "FINISHED" and run.info.run_name == "run"


@MLFLOW
def test_mlflow_metrics_per_round_equal_rounds_csv(mlflow_run: Path) -> None:
    client = _mlflow(mlflow_run.parent)
    [run] = _runs(client, "tiny")
    rows = _rows(mlflow_run)
    columns = [c for c in rows[0] if c != "round"]
    assert {"val_acc", "test_acc", "ari", "num_clusters", "bytes_up", "seconds"} <= set(columns)
    for column in columns:
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, column))
        expected = _expected(rows, column)
        assert [s for s, _ in history] == [s for s, _ in expected] == [1, 2, 3], column
        assert [v for _, v in history] == pytest.approx([v for _, v in expected], rel=1e-5, abs=1e-9), column


@MLFLOW
def test_mlflow_artifacts_are_the_run_directory_files(mlflow_run: Path, tmp_path: Path) -> None:
    client = _mlflow(mlflow_run.parent)
    [run] = _runs(client, "tiny")
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert names == {"config.yaml", "rounds.csv", "clients.csv", "summary.json", "clusters.jsonl", "accuracy.png"}
    for name in ("rounds.csv", "summary.json"):
        local = client.download_artifacts(run.info.run_id, name, str(tmp_path))
        assert Path(local).read_bytes() == (mlflow_run / name).read_bytes()
    assert (mlflow_run.parent / "mlartifacts").is_dir() and not (mlflow_run / "tensorboard").exists()
    assert not (mlflow_run / "mlflow.db").exists()


def _scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@TENSORBOARD
def test_tensorboard_scalars_equal_rounds_csv(tmp_path: Path) -> None:
    out = tmp_path / "tb"
    assert main(["run", *FAST, f"out={out}", "tracking=tensorboard", "eval_every=2"]) == 0
    rows = _rows(out)
    scalars = _scalars(out / "tensorboard")
    assert set(scalars) == {c for c in rows[0] if c != "round"}
    for column, logged in scalars.items():
        expected = _expected(rows, column)
        assert [s for s, _ in logged] == [s for s, _ in expected], column
        assert [v for _, v in logged] == pytest.approx([v for _, v in expected], rel=1e-5, abs=1e-6), column
    assert [s for s, _ in scalars["val_acc"]] == [2, 3]  # round 1 was not evaluated: nothing, not NaN
    assert not (out / "mlflow.db").exists() and not (tmp_path / "mlflow.db").exists()


@MLFLOW
def test_resumed_run_logs_every_round_once(tmp_path: Path) -> None:
    out, db = tmp_path / "both", tmp_path / "shared" / "mlflow.db"
    db.parent.mkdir()
    both = ["tracking=[mlflow,tensorboard]", f"tracking_uri=sqlite:///{db}"]
    assert main(["run", *FAST, f"out={out}", *both, "rounds=2", "checkpoint_every=1"]) == 0
    assert main(["resume", str(out), "rounds=3"]) == 0
    rows = _rows(out)
    assert [s for s, _ in _scalars(out / "tensorboard")["test_acc"]] == [1, 2, 3]
    assert [v for _, v in _scalars(out / "tensorboard")["test_acc"]] == pytest.approx(
        [v for _, v in _expected(rows, "test_acc")], rel=1e-5)
    client = _mlflow(db.parent)
    first, resumed = _runs(client)
    assert {a.path for a in client.list_artifacts(resumed.info.run_id)} >= {"rounds.csv", "summary.json"}
    assert (db.parent / "mlartifacts").is_dir() and not (out / "mlflow.db").exists()
    assert resumed.data.tags["fedcluster.resumed_after_round"] == "2"
    history = sorted((m.step, m.value) for m in client.get_metric_history(resumed.info.run_id, "test_acc"))
    expected = _expected(rows, "test_acc")
    assert [s for s, _ in history] == [s for s, _ in expected] == [1, 2, 3]
    assert [v for _, v in history] == pytest.approx([v for _, v in expected], rel=1e-5)
    assert first.data.params["rounds"] == "2" and resumed.data.params["rounds"] == "3"


def test_missing_package_is_one_line_naming_the_extra(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    out = tmp_path / "m"
    assert main(["run", *FAST, f"out={out}", "tracking=mlflow"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "pip install 'fedcluster[tracking]'" in err[0] and "'mlflow'" in err[0]
    assert not (out / "rounds.csv").exists()


@MLFLOW
def test_refused_tracking_uri_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    out = tmp_path / "u"
    assert main(["run", *FAST, f"out={out}", "tracking=mlflow", f"tracking_uri={tmp_path / 'mlruns'}"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "tracking_uri=" in err[0] and "sqlite:///" in err[0]


def test_bad_tracking_name_is_one_line(capsys) -> None:
    assert main(["run", *FAST, "tracking=comet"]) == 2
    err = capsys.readouterr().err
    assert "comet" in err and "wandb" in err and "mlflow" in err and "tensorboard" in err


class _Broken:
    def __init__(self) -> None:
        self.ended: list[str] = []

    def start(self, rows) -> None:  # noqa: ANN001
        pass

    def log_round(self, row) -> None:  # noqa: ANN001
        raise OSError("disk full")

    def end(self, status: str) -> None:
        self.ended.append(status)


def test_a_failing_logger_is_dropped_and_the_run_goes_on(capsys) -> None:
    broken, fine = _Broken(), _Broken()
    fine.log_round = lambda row: None  # type: ignore[method-assign]
    tracking = Tracking([broken, fine])
    tracking.start([])
    tracking.log_round({"round": 1, "val_acc": 0.5})
    tracking.log_round({"round": 2, "val_acc": 0.5})
    tracking.end("FINISHED")
    assert "disk full" in capsys.readouterr().err and broken.ended == [] and fine.ended == ["FINISHED"]


@pytest.mark.parametrize(("raised", "status"), [(None, "FINISHED"), (KeyboardInterrupt, "KILLED"),
                                                 (RuntimeError, "FAILED")])
def test_tracking_ends_with_the_run_status(raised: type[BaseException] | None, status: str, tmp_path: Path,
                                           monkeypatch) -> None:
    from fedcluster.config.run_config import RunConfig
    from fedcluster.tracking import loggers

    made: list[_Broken] = []
    monkeypatch.setitem(loggers.LOGGERS, "mlflow", lambda cfg, run_dir: made.append(_Broken()) or made[-1])
    with pytest.raises(raised) if raised else contextlib.nullcontext(), \
            loggers.open_tracking(RunConfig(tracking=["mlflow", "none", "mlflow"]), tmp_path):
        if raised:
            raise raised
    assert len(made) == 1 and made[0].ended == [status]
    with loggers.open_tracking(RunConfig(), tmp_path) as nothing:
        assert nothing.observers == []


@MLFLOW
def test_runs_of_one_folder_land_in_one_experiment_by_default(tmp_path: Path) -> None:
    study = tmp_path / "study"
    for seed in (1, 2):
        assert main(["run", *FAST, "rounds=1", f"seed={seed}", f"out={study / f'ifca-{seed}'}", "tracking=mlflow"]) == 0
    runs = _runs(_mlflow(study))
    assert sorted(r.info.run_name for r in runs) == ["ifca-1", "ifca-2"]
    assert sorted(r.data.params["seed"] for r in runs) == ["1", "2"]
    assert not any((study / f"ifca-{seed}" / "mlflow.db").exists() for seed in (1, 2))


@MLFLOW
def test_search_runs_reads_the_store_back(mlflow_run: Path) -> None:
    """The usual read-back, ``mlflow.search_runs`` (a pandas DataFrame: the tracking extra installs pandas)."""
    pytest.importorskip("pandas")
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{mlflow_run.parent / 'mlflow.db'}")
    try:
        frame = mlflow.search_runs(experiment_names=["tiny"], filter_string="params.algorithm = 'ifca'")
    finally:
        mlflow.set_tracking_uri(None)
    last = _rows(mlflow_run)[-1]
    assert len(frame) == 1 and frame["tags.mlflow.runName"].iloc[0] == "run"
    assert frame["metrics.test_acc"].iloc[0] == pytest.approx(last["test_acc"], rel=1e-6)


def test_the_tracking_extra_installs_what_search_runs_needs() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extra = {r.split(">")[0].split("=")[0].split("[")[0].strip() for r in
             pyproject["project"]["optional-dependencies"]["tracking"]}
    assert {"mlflow-skinny", "pandas", "sqlalchemy", "alembic"} <= extra


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]  # the federation's description comes first
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@MLFLOW
def test_a_server_that_refuses_fails_fast(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start = time.monotonic()
    assert main(["run", *FAST, f"out={tmp_path / 'r'}", "tracking=mlflow", "tracking_uri=http://127.0.0.1:9"]) == 2
    assert time.monotonic() - start < 20
    assert "http://127.0.0.1:9" in _one_error_line(capsys)
    assert not (tmp_path / "r" / "rounds.csv").exists()


@MLFLOW
def test_a_server_that_never_answers_fails_within_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A port that accepts connections and never replies; MLFLOW_HTTP_REQUEST_TIMEOUT set by the user wins."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        assert main(["run", *FAST, f"out={tmp_path / 'r'}", "tracking=mlflow", f"tracking_uri={uri}"]) == 2
        elapsed = time.monotonic() - start
    assert elapsed < 15, elapsed
    assert uri in _one_error_line(capsys)


@pytest.mark.parametrize("where", ["folder", "file-as-folder", "proc"])
def test_a_sqlite_path_that_cannot_be_a_database_is_one_line(where: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("x")
    path = {"folder": tmp_path, "file-as-folder": tmp_path / "a-file" / "mlflow.db",
            "proc": Path("/proc/mlflow.db")}[where]
    start = time.monotonic()
    assert main(["run", *FAST, f"out={tmp_path / 'r'}", "tracking=mlflow", f"tracking_uri=sqlite:///{path}"]) == 2
    assert time.monotonic() - start < 10
    assert "tracking_uri=" in _one_error_line(capsys)
    assert not (tmp_path / "r" / "rounds.csv").exists()


@MLFLOW
def test_a_missing_sqlite_folder_is_created(tmp_path: Path) -> None:
    db = tmp_path / "new" / "deeper" / "mlflow.db"
    uri = f"tracking_uri=sqlite:///{db}"
    assert main(["run", *FAST, "rounds=1", f"out={tmp_path / 'r'}", "tracking=mlflow", uri]) == 0
    assert [r.info.run_name for r in _runs(_mlflow(db.parent))] == ["r"]
