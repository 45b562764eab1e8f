"""tracking=wandb: a run's config, per-round metrics and result files in a Weights & Biases run, checked offline
(WANDB_MODE=offline: no network, no account) by reading the run's transaction log back."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fedcluster.app.cli import main

FAST = ["num_clients=8", "rounds=3", "progress=false", "algorithm=ifca"]
WANDB = pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="needs wandb (fedcluster[wandb])")
BLOCK, HEADER = 32768, 7  # the .wandb file: a 7-byte header, then LevelDB-log records in 32 KiB blocks


@pytest.fixture(autouse=True)
def fresh_wandb() -> Iterator[None]:
    """W&B reads its environment once per process: each test starts from a torn-down W&B."""
    yield
    if "wandb" in sys.modules and sys.modules["wandb"] is not None:
        sys.modules["wandb"].teardown()


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """W&B offline, its settings and caches in ``tmp_path`` (nothing in the home folder)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    return tmp_path


def records(path: Path) -> list:
    """The protobuf records of one offline run's ``run-ID.wandb`` file (W&B has no public reader of it)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, out, chunk, at = path.read_bytes(), [], b"", HEADER
    assert data[:4] == b":W&B"
    while at + 7 <= len(data):
        if BLOCK - at % BLOCK < 7:  # a block's tail too short for a record header is padding
            at += BLOCK - at % BLOCK
            continue
        length, kind = struct.unpack("<HB", data[at + 4: at + 7])
        if (length == 0 and kind == 0) or at + 7 + length > len(data):  # the end, or a record still being written
            break
        chunk += data[at + 7: at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # FULL or LAST
            rec = pb.Record()
            rec.ParseFromString(chunk)
            out.append(rec)
            chunk = b""
    return out


def finished_records(path: Path, timeout: float = 120.0) -> list:
    """The records once W&B's service has written the run's exit record (it writes the file after
    ``run.finish()`` returns, later on a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        recs = records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in recs) or time.monotonic() > deadline:
            return recs
        time.sleep(0.5)


def offline_runs(run_dir: Path) -> list[dict]:
    """Per offline W&B run (oldest first): its config, history (step -> metrics), exit code and files."""
    runs = []
    # oldest first by the folders' last change: their names hold the start second and a random id, so two runs
    # started within one second would sort at random by name
    for folder in sorted((run_dir / "wandb").glob("offline-run-*"), key=lambda p: p.stat().st_mtime_ns):
        config, history, exit_code = {}, {}, None
        for rec in finished_records(next(folder.glob("run-*.wandb"))):
            kind = rec.WhichOneof("record_type")
            if kind in ("run", "config"):  # the run record holds the config given to wandb.init
                updates = rec.run.config.update if kind == "run" else rec.config.update
                config.update({u.key: json.loads(u.value_json) for u in updates})
            elif kind == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
                history[int(items.pop("_step"))] = {k: v for k, v in items.items() if not k.startswith("_")}
            elif kind == "exit":
                exit_code = rec.exit.exit_code
        runs.append({"config": config, "history": history, "exit": exit_code,
                     "files": {p.name for p in (folder / "files").iterdir()}})
    return runs


def _rows(run_dir: Path) -> list[dict[str, float]]:
    with (run_dir / "rounds.csv").open() as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _check_history(history: dict[int, dict], rows: list[dict[str, float]]) -> None:
    assert sorted(history) == [int(r["round"]) for r in rows]
    for r in rows:
        expected = {k: v for k, v in r.items() if k != "round" and not math.isnan(v)}
        assert history[int(r["round"])] == pytest.approx(expected, rel=1e-5, abs=1e-6)


@WANDB
def test_offline_run_holds_the_config_every_round_and_the_result_files(offline: Path) -> None:
    out = offline / "run"
    assert main(["run", *FAST, f"out={out}", "tracking=wandb", "eval_every=2", "tracking_experiment=tiny"]) == 0
    [run] = offline_runs(out)
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert run["config"]["algorithm"] == "ifca" and run["config"]["rounds"] == "3"
    assert run["config"]["tracking"] == '["wandb"]' and "algorithm.num_clusters" in run["config"]
    assert run["config"]["lr"] == str(cfg["lr"])
    rows = _rows(out)
    _check_history(run["history"], rows)
    assert "val_acc" not in run["history"][1] and "val_acc" in run["history"][2]  # not evaluated: skipped
    assert run["exit"] == 0
    assert {"config.yaml", "rounds.csv", "summary.json", "clients.csv", "accuracy.png"} <= run["files"]


@WANDB
def test_a_resumed_run_starts_a_new_wandb_run_holding_every_round(offline: Path) -> None:
    out = offline / "run"
    assert main(["run", *FAST, f"out={out}", "tracking=wandb", "rounds=2", "checkpoint_every=1"]) == 0
    assert main(["resume", str(out), "rounds=3"]) == 0
    first, resumed = offline_runs(out)
    assert sorted(first["history"]) == [1, 2]
    _check_history(resumed["history"], _rows(out))
    assert resumed["config"]["rounds"] == "3"


def test_missing_wandb_is_one_line_naming_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    out = tmp_path / "w"
    assert main(["run", *FAST, f"out={out}", "tracking=wandb"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "pip install 'fedcluster[wandb]'" in err[0] and "'wandb'" in err[0]
    assert not (out / "rounds.csv").exists()


@WANDB
def test_online_without_a_login_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc login
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    assert main(["run", *FAST, f"out={tmp_path / 'w'}", "tracking=wandb"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "wandb login" in err[0] and "WANDB_MODE=offline" in err[0]


def test_the_wandb_extra_is_declared_and_in_all() -> None:
    import tomllib

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(r.startswith("wandb") for r in extras["wandb"])
    assert "wandb" in extras["all"][0]
