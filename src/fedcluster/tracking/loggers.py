"""Optional experiment tracking: the run loop reports to observers, which log to MLflow, TensorBoard and W&B.

``tracking=mlflow`` (and/or ``tensorboard``) logs the resolved config as parameters, every ``rounds.csv``
column as a per-round metric (step = round; rounds without evaluation are skipped, not logged as NaN) and,
when the run ends, the run directory's result files as MLflow artefacts. MLflow and TensorBoard are
imported only when asked for. MLflow 3 refuses its file store (``./mlruns``) unless
``MLFLOW_ALLOW_FILE_STORE=true``, so the default store is MLflow's recommended local one, a SQLite
database shared by the runs of one folder: ``sqlite:///RUNS/mlflow.db`` (RUNS = the folder that holds the
run directory) with the artefacts in ``RUNS/mlartifacts``, so that the runs of a study land in one
experiment. The store is checked before the first round, quickly: a SQLite path that cannot be a database
file, or a server that does not answer within ``MLFLOW_HTTP_REQUEST_TIMEOUT`` seconds (10 unless set) with
``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` retries (0 unless set), ends the run with one line.
``tracking=wandb`` (Weights & Biases) is :mod:`fedcluster.tracking.wandb_logger`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedcluster.config.notes import note
from fedcluster.config.run_config import RunConfig
from fedcluster.errors import InterruptedRun, UserError
from fedcluster.tracking.observer import (
    RunObserver,
    flatten_config,
    require,
    result_files,
    round_metrics,
)

START_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


def _artifact_root(uri: str) -> str | None:
    """A new experiment in a SQLite store keeps its artefacts beside the database (MLflow's default would be
    ./mlruns of the current directory); other stores (servers) choose for themselves."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri[len("sqlite:///"):]).resolve().parent / "mlartifacts").as_uri()


def default_tracking_uri(run_dir: Path) -> str:
    """The SQLite store shared by the runs beside ``run_dir`` (in its parent folder)."""
    return "sqlite:///" + str(run_dir.resolve().parent / "mlflow.db")


def check_sqlite_uri(uri: str) -> None:
    """One line when a ``sqlite:///PATH`` URI cannot name a database file that this process can write (a
    folder, a path under a file, a read-only place), before SQLAlchemy's retries and tracebacks. A missing
    folder is created, as MLflow would."""
    if not uri.startswith("sqlite:"):
        return
    if not uri.startswith("sqlite:///"):
        raise UserError(f"tracking_uri={uri!r} is not sqlite:///PATH/mlflow.db (three slashes, then the path; "
                        "an absolute path starts with a fourth)")
    path = Path(uri[len("sqlite:///"):].split("?", 1)[0])
    hint = "; use e.g. tracking_uri=sqlite:///PATH/mlflow.db or leave it unset"
    if path == Path(":memory:") or not path.name:
        raise UserError(f"tracking_uri={uri!r} names no database file{hint}")
    if path.is_dir():
        raise UserError(f"tracking_uri={uri!r} names a folder, not a database file{hint}")
    if path.exists() and not path.is_file():
        raise UserError(f"tracking_uri={uri!r} is not a regular file{hint}")
    try:  # what SQLite will do: create the folder and the file, open it for writing
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab"):
            pass
    except OSError as e:
        raise UserError(f"tracking_uri={uri!r}: cannot write a database there ({e.strerror or e}){hint}") from None


@contextmanager
def bounded_http_requests() -> Iterator[None]:
    """MLflow's HTTP retries and timeout bounded (``START_HTTP_ENV``, unless set in the environment), so that
    a server that does not answer fails the start within seconds instead of minutes of retries."""
    added = {k: v for k, v in START_HTTP_ENV.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class MlflowLogger:
    """One MLflow run per fedcluster run (a resumed run starts a new MLflow run holding every round)."""

    def __init__(self, cfg: RunConfig, run_dir: Path) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        from_env = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
        self.uri = cfg.tracking_uri or from_env or default_tracking_uri(run_dir)
        if not cfg.tracking_uri and from_env:
            note(f"tracking=mlflow logs to MLFLOW_TRACKING_URI={self.uri[:80]} (tracking_uri= overrides it)")
        check_sqlite_uri(self.uri)
        require("mlflow", *(("sqlalchemy", "alembic") if self.uri.startswith("sqlite:") else ()))
        self.client: Any = None
        self.run_id = ""

    def start(self, rows: Sequence[Mapping[str, float]]) -> None:
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        for name in ("mlflow", "alembic"):  # schema creation chatter on a fresh store
            logging.getLogger(name).setLevel(logging.WARNING)
        try:
            with bounded_http_requests():
                self.client = MlflowClient(self.uri)
                exp = self.client.get_experiment_by_name(self.cfg.tracking_experiment)
                artifacts = _artifact_root(self.uri)
                exp_id = exp.experiment_id if exp else self.client.create_experiment(
                    self.cfg.tracking_experiment, artifact_location=artifacts)
                tags = {"fedcluster.run_dir": str(self.run_dir.resolve())}
                if rows:
                    tags["fedcluster.resumed_after_round"] = str(int(rows[-1]["round"]))
                self.run_id = self.client.create_run(exp_id, run_name=self.run_dir.name, tags=tags).info.run_id
        except (MlflowException, OSError, ImportError) as e:
            raise UserError(f"tracking_uri={self.uri!r}: MLflow could not use it ({_first_sentence(e)}); use e.g. "
                            "tracking_uri=sqlite:///PATH/mlflow.db or a server that answers, or leave it "
                            "unset") from None
        except Exception as e:  # noqa: BLE001 - SQLAlchemy's errors (locked, corrupt database) and the like
            raise UserError(f"tracking_uri={self.uri!r}: MLflow could not open it ({type(e).__name__}: "
                            f"{_first_sentence(e)}); use e.g. tracking_uri=sqlite:///PATH/mlflow.db or leave it "
                            "unset") from None
        params = [Param(k, v) for k, v in flatten_config(self.cfg).items()]
        for i in range(0, len(params), 100):  # MLflow's limit per batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])
        for row in rows:
            self.log_round(row)

    def discard(self) -> None:
        """Undo :meth:`start` (another logger could not start): the MLflow run is deleted for good."""
        if self.run_id:
            with contextlib.suppress(Exception):
                self.client.delete_run(self.run_id)
                store = getattr(self.client, "_tracking_client", None)
                purge = getattr(getattr(store, "store", None), "_hard_delete_run", None)
                if purge is not None:  # the SQL store keeps deleted runs until `mlflow gc`; this one never ran
                    purge(self.run_id)
            self.run_id = ""

    def log_round(self, row: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric

        stamp, step = int(time.time() * 1000), int(row["round"])
        metrics = [Metric(k, v, stamp, step) for k, v in round_metrics(row).items()]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def end(self, status: str) -> None:
        if not self.run_id:
            return
        if status == "FINISHED":
            for path in result_files(self.run_dir):
                self.client.log_artifact(self.run_id, str(path))
        self.client.set_terminated(self.run_id, status=status)


def _first_sentence(e: BaseException) -> str:
    text = str(getattr(e, "message", None) or e)
    return " ".join(text.split(". ")[0].split())[:200]


class TensorBoardLogger:
    """Scalars per round under the column names, and the resolved config as text."""

    def __init__(self, cfg: RunConfig, run_dir: Path) -> None:
        require("tensorboard", "torch.utils.tensorboard")
        self.cfg = cfg
        self.log_dir = Path(cfg.tensorboard_dir) if cfg.tensorboard_dir else run_dir / "tensorboard"
        self.writer: Any = None
        self.before: set[Path] | None = None  # the log folder's files before this writer (None: no folder)

    def start(self, rows: Sequence[Mapping[str, float]]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.before = set(self.log_dir.iterdir()) if self.log_dir.is_dir() else None
        # purge_step=1: a resumed run drops what an earlier writer logged and logs every kept round again
        self.writer = SummaryWriter(str(self.log_dir), purge_step=1 if rows else None, flush_secs=10)
        table = "\n".join(f"    {k}: {v}" for k, v in flatten_config(self.cfg).items())
        self.writer.add_text("config", table)
        for row in rows:
            self.log_round(row)

    def log_round(self, row: Mapping[str, Any]) -> None:
        step = int(row["round"])
        for key, value in round_metrics(row).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def end(self, status: str) -> None:
        if self.writer is not None:
            self.writer.close()

    def discard(self) -> None:
        """Undo :meth:`start`: the writer's events file goes, and its folder if the writer made it."""
        if self.writer is None:
            return
        self.writer.close()
        self.writer = None
        with contextlib.suppress(OSError):
            for path in set(self.log_dir.iterdir()) - (self.before or set()):
                path.unlink()
            if self.before is None:
                self.log_dir.rmdir()


class Tracking:
    """Fans the run loop's events out to the chosen loggers (none: every call does nothing).

    A logger that fails after the start is dropped with one warning: tracking never stops a run, whose
    results are in the run directory anyway.
    """

    def __init__(self, observers: Sequence[RunObserver]) -> None:
        self.observers = list(observers)

    def start(self, rows: Sequence[Mapping[str, float]]) -> None:
        """Start every logger, or none: when one cannot start, those started before it are undone (no run left
        FAILED in MLflow, no empty TensorBoard file) and its error goes on."""
        started: list[RunObserver] = []
        try:
            for o in self.observers:
                o.start(rows)
                started.append(o)
        except BaseException:
            for o in reversed(started):
                discard = getattr(o, "discard", None)
                if discard is not None:
                    with contextlib.suppress(Exception):
                        discard()
            self.observers = []
            raise

    def log_round(self, row: Mapping[str, Any]) -> None:
        self._each(lambda o: o.log_round(row))

    def end(self, status: str) -> None:
        self._each(lambda o: o.end(status))

    def _each(self, call: Callable[[RunObserver], None]) -> None:
        for o in list(self.observers):
            try:
                call(o)
            except Exception as e:  # noqa: BLE001 - any tracking failure, reported and survived
                print(f"fedcluster: warning: {type(o).__name__} failed ({' '.join(str(e).split())[:200]}); "
                      "tracking to it stops, the run goes on", file=sys.stderr)
                self.observers.remove(o)


def _wandb(cfg: RunConfig, run_dir: Path) -> RunObserver:
    from fedcluster.tracking.wandb_logger import WandbLogger

    return WandbLogger(cfg, run_dir)


LOGGERS: dict[str, Callable[[RunConfig, Path], RunObserver]] = {
    "mlflow": MlflowLogger, "tensorboard": TensorBoardLogger, "wandb": _wandb}


@contextmanager
def open_tracking(cfg: RunConfig, run_dir: Path) -> Iterator[Tracking]:
    """The loggers named by ``cfg.tracking``; ended FINISHED after the block, KILLED/FAILED if it raises."""
    names = dict.fromkeys(n for n in cfg.tracking if n != "none")
    tracking = Tracking([LOGGERS[n](cfg, run_dir) for n in names])
    try:
        yield tracking
    except (KeyboardInterrupt, InterruptedRun):
        tracking.end("KILLED")
        raise
    except BaseException:
        tracking.end("FAILED")
        raise
    tracking.end("FINISHED")
