"""Environment and configuration cases that used to end in a traceback or run silently: a stale torchrun
environment, MLFLOW_TRACKING_URI, FedGroup with more groups than clients, FL+HC clustering after the last round."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bad_inputs.test_bad_run_dir_properties import outcome, refused

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("port", [True, False], ids=["no rank 1", "no MASTER_PORT"])
def test_a_stale_torchrun_environment_is_one_line(tmp_path: Path, port: bool) -> None:
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "FEDCLUSTER_COLLECTIVE_TIMEOUT": "3", "FEDCLUSTER_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("MASTER_PORT", None)
    if port:
        env["MASTER_PORT"] = str(_free_port())
    done = subprocess.run([sys.executable, "-m", "fedcluster", "run", "num_clients=4", "rounds=1", "progress=false",
                           f"out={tmp_path / 'r'}"], env=env, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip() and not ln.startswith("fedcluster: note:")]
    assert done.returncode == 2 and len(lines) == 1 and "torchrun" in lines[0], (done.returncode, lines[-5:])


def test_mlflow_tracking_uri_from_the_environment_is_honoured_with_a_note(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from fedcluster.app.cli import main

    database = tmp_path / "elsewhere.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{database}")
    assert main(["run", "num_clients=4", "rounds=1", "progress=false", "tracking=mlflow",
                 f"out={tmp_path / 'r'}"]) == 0
    assert database.is_file() and "MLFLOW_TRACKING_URI" in capsys.readouterr().err


def test_fedgroup_with_more_groups_than_clients_is_refused(tmp_path: Path) -> None:
    refused(["run", "algorithm=fedgroup", "algorithm.num_groups=100", "num_clients=8", "rounds=1", "progress=false",
             f"out={tmp_path / 'r'}"], "num_groups=100")


def test_flhc_clustering_after_the_last_round_is_said(tmp_path: Path) -> None:
    import io
    from contextlib import redirect_stderr

    from fedcluster.app.cli import main

    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(["run", "algorithm=flhc", "algorithm.cluster_round=5", "num_clients=6", "rounds=2",
                   "progress=false", f"out={tmp_path / 'r'}"])
    assert rc == 0 and "cluster_round=5 is past the last round" in err.getvalue()
    assert outcome(["report", str(tmp_path / "r")])[0] == 0


@pytest.mark.parametrize("bad", [["--superlink", "no-port", "--insecure"],
                                 ["--superlink", "127.0.0.1:8000", "--root-certificates", "/no/such/ca.pem"]],
                         ids=["address", "certificate"])
def test_flower_serve_under_a_long_tmpdir_names_the_bad_address_or_certificate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: list[str]) -> None:
    import tempfile

    long = tmp_path / ("t" * 100) / ("u" * 100)
    long.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(long))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    line = refused(["flower", "serve", *bad, "num_clients=4", "rounds=1", f"out={tmp_path / 'r'}"], "")
    assert "too long" not in line and ("superlink" in line or "certificates" in line), line


def test_a_tracker_that_cannot_start_is_said_before_any_federation_summary(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    rc, lines = outcome(["run", "num_clients=4", "rounds=1", "progress=false", "tracking=mlflow",
                         f"tracking_uri=http://127.0.0.1:{_free_port()}/", f"out={tmp_path / 'r'}"])
    assert rc == 2 and lines[-1].startswith("fedcluster: error: tracking_uri="), lines[-3:]
    assert not any("samples per client" in line for line in lines), lines
