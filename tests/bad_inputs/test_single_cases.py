"""Single bad inputs that once ended in a traceback or a silent result, each pinned: config YAML quirks, method
parameters, image files, the library API, resumed runs (precision, the end picture) and poisoned caches."""

from __future__ import annotations

import io
import json
import shutil
import struct
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch

import fedcluster
from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, parse_value
from fedcluster.config.validation import read_config_file
from fedcluster.errors import ConfigError, UserError

RUN = ["run", "num_clients=4", "rounds=1", "progress=false"]


def outcome(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue()


def one_line(argv: list[str], needle: str) -> str:
    rc, err = outcome(argv)
    lines = [ln for ln in err.splitlines() if not ln.startswith("fedcluster: note:")]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("fedcluster: error:"), (rc, err[-1500:])
    assert needle in lines[0], lines[0]
    return lines[0]


# -- YAML ------------------------------------------------------------------------------------------------------
def _yaml(tmp_path: Path, text: str) -> Path:
    (tmp_path / "c.yaml").write_text(text)
    return tmp_path / "c.yaml"


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'rounds' is given twice"):
        read_config_file(_yaml(tmp_path, "rounds: 2\nlr: 0.1\nrounds: 3\n"))
    with pytest.raises(ConfigError, match="'name' is given twice"):
        read_config_file(_yaml(tmp_path, "algorithm:\n  name: ifca\n  name: cfl\n"))


def test_yaml_11_numbers_are_read_as_meant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert read_config_file(_yaml(tmp_path, "rounds: 1:0\n")) == {"rounds": "1:0"}  # not 60
    assert read_config_file(_yaml(tmp_path, "seed: 0777\n")) == {"seed": 777}  # not octal 511
    assert "read as the decimal 777" in capsys.readouterr().err
    assert read_config_file(_yaml(tmp_path, "lr: 1e-3\nx: 0x10\ny: .5\nz: -.inf\n")) == {
        "lr": 0.001, "x": 16, "y": 0.5, "z": -np.inf}
    assert parse_value("1:0") == "1:0"
    one_line(["run", str(_yaml(tmp_path, "rounds: 1:0\n"))], "rounds must be an integer")


def test_huge_and_deep_values_are_one_line(tmp_path: Path) -> None:
    one_line(["run", str(_yaml(tmp_path, f"rounds: {'9' * 5000}\n"))], "5000 digits")
    one_line(["run", str(_yaml(tmp_path, "rounds: " + "[" * 5000 + "]" * 5000 + "\n"))], "too deeply")
    one_line([*RUN, "algorithm.x=" + "[" * 5000 + "]" * 5000], "algorithm.x")
    one_line([*RUN, f"rounds={'9' * 5000}"], "rounds")


def test_a_file_that_is_no_config_is_not_echoed(tmp_path: Path) -> None:
    secret = "root:$6$SECRETHASH:19000:0:99999:7:::"
    line = one_line(["run", str(_yaml(tmp_path, secret + "\n"))], "not a fedcluster config")
    assert "SECRETHASH" not in line and "99999" not in line


# -- method parameters, images and models --------------------------------------------------------------------
def test_method_parameter_ranges() -> None:
    one_line([*RUN, "algorithm=fedmd", "algorithm.num_anchors=-1"], "num_anchors")
    one_line([*RUN, "algorithm=cflgp", "algorithm.t_cl=-1"], "t_cl")
    one_line([*RUN, "algorithm=cflgp", "algorithm.t_cl=0"], "t_cl")


MNIST = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _idx(a: np.ndarray, code: int) -> bytes:
    dtype = {0x08: ">u1", 0x0E: ">f8"}[code]
    return bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.astype(dtype).tobytes()


def _mnist(d: Path, images: np.ndarray, code: int = 0x08) -> None:
    n = len(images)
    for name, data in zip(MNIST, (_idx(images, code), _idx(np.arange(n) % 10, 0x08), _idx(images[: n // 2], code),
                                  _idx(np.arange(n // 2) % 10, 0x08)), strict=True):
        (d / name).write_bytes(data)


@pytest.mark.parametrize(("images", "code", "needle"), [
    (np.zeros((12, 6, 0)), 0x08, "no pixels"),
    (np.full((12, 6, 6), 1e300), 0x0E, "float32 range"),
    (np.full((12, 6, 6), -1e300), 0x0E, "float32 range"),
])
def test_unusable_idx_images_are_data_errors(tmp_path: Path, images: np.ndarray, code: int, needle: str) -> None:
    _mnist(tmp_path, images, code)
    one_line([*RUN, "dataset=mnist", f"data_dir={tmp_path}", f"out={tmp_path / 'r'}"], needle)


@pytest.mark.parametrize("model", ["cnn", "light-cnn"])
def test_cnns_refuse_images_too_small_for_their_pools(tmp_path: Path, model: str) -> None:
    _mnist(tmp_path, np.random.default_rng(0).integers(0, 256, (400, 1, 1)))
    one_line([*RUN, "dataset=mnist", f"data_dir={tmp_path}", f"model={model}", f"out={tmp_path / 'r'}"], "4x4")


# -- library API -----------------------------------------------------------------------------------------------
def test_numpy_scalars_are_accepted() -> None:
    cfg, _ = fedcluster.load_config(num_clients=np.int64(4), lr=np.float32(0.05), rounds=np.int32(2),
                                    progress=np.bool_(False), **{"scenario.val_fraction": np.float64(0.3)})
    assert (cfg.num_clients, cfg.rounds, cfg.progress) == (4, 2, False) and abs(cfg.lr - 0.05) < 1e-7
    assert type(cfg.num_clients) is int and type(cfg.lr) is float
    with pytest.raises(ConfigError, match="finite"):
        fedcluster.load_config(lr=np.float32("nan"))


def test_bad_library_calls_raise_fedcluster_errors(tmp_path: Path) -> None:
    for call in (lambda: fedcluster.run(federation="fed", num_clients=4, out=str(tmp_path / "r")),
                 lambda: fedcluster.build_federation(use_cache="no"),
                 lambda: fedcluster.run([1, 2]), lambda: fedcluster.run(tmp_path)):
        with pytest.raises(UserError):
            call()


def test_a_federation_of_another_size_overrides_num_clients_with_a_note(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    fed = fedcluster.build_federation({"num_clients": 6})
    capsys.readouterr()
    res = fedcluster.run({"num_clients": 4, "rounds": 1, "progress": False, "out": str(tmp_path / "r")}, federation=fed)
    assert res.config.num_clients == 6 and "num_clients=4 is replaced by the 6 clients" in capsys.readouterr().err


# -- resumed runs ---------------------------------------------------------------------------------------------
def _copy(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    return run


def test_resume_redoes_the_picture_after_a_kill_before_it(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    (run / "accuracy.png").unlink()
    rc, err = outcome(["resume", str(run), "progress=false"])
    assert rc == 0 and "nothing to do" not in err, err
    assert (run / "accuracy.png").stat().st_size > 0


@pytest.mark.host_only(reason="resumes the session's finished run, made on the host: another engine's rounds "
                        "agree to float tolerance, not to the digit this test compares")
def test_a_resumed_summary_keeps_full_precision(finished: Path, tmp_path: Path) -> None:
    """rounds.csv holds 6 digits; the summary of a resumed run must equal a straight run's, not those digits."""
    run = _copy(finished, tmp_path)
    assert outcome(["resume", str(run), "rounds=3", "progress=false"])[0] == 0
    straight = tmp_path / "straight"
    assert outcome(["run", "algorithm=ifca", "num_clients=6", "rounds=3", "progress=false", f"out={straight}"])[0] == 0
    resumed, plain = (json.loads((p / "summary.json").read_text()) for p in (run, straight))
    assert resumed["best"] == plain["best"] and resumed["at_best_val"] == plain["at_best_val"]


def test_a_poisoned_cache_with_a_fresh_checksum_is_rebuilt(tmp_path: Path) -> None:
    from fedcluster.config.run_config import resolve
    from fedcluster.data.build import cache_key, cache_path
    from fedcluster.storage.state_file import load_state, save_state

    cfg, typed = resolve(load_raw(None, ["num_clients=5", "seed=11"]))
    fedcluster.build_federation({"num_clients": 5, "seed": 11})
    path, key = cache_path(cfg, typed["scenario"]), cache_key(cfg, typed["scenario"])
    state = load_state(path, "federation", key)
    state["train"]["y"] = torch.full_like(state["train"]["y"], 99)
    save_state(path, state, "federation", key)
    err = io.StringIO()
    with redirect_stderr(err):
        fed = fedcluster.build_federation({"num_clients": 5, "seed": 11})
    assert "labels lie outside" in err.getvalue() and int(fed.train.y.max()) < fed.num_classes


def test_config_yaml_never_builds_python_objects(tmp_path: Path) -> None:
    """Config files may come from someone else: a Python tag is a YAML error, never a call."""
    import yaml

    from fedcluster.config.yaml_dialect import load_yaml

    marker = tmp_path / "ran"
    for text in (f"seed: !!python/object/apply:os.system ['touch {marker}']",
                 f"seed: !!python/object/new:os.system ['touch {marker}']", "seed: !!python/name:os.system"):
        with pytest.raises(yaml.YAMLError):
            load_yaml(text)
    assert not marker.exists()


CACHE_CRAFTS = {  # a cached federation rewritten with a valid checksum: what the loader must see through
    "float64 inputs": lambda s: s["train"].update(x=s["train"]["x"].double()),
    "float16 inputs": lambda s: s["val"].update(x=s["val"]["x"].half()),
    "int32 labels": lambda s: s["train"].update(y=s["train"]["y"].int()),
    "uint8 labels": lambda s: s["test"].update(y=s["test"]["y"].to(torch.uint8)),
    "eleven classes": lambda s: s.update(num_classes=11),
    "test cluster 1e9": lambda s: s.update(test_cluster=np.full_like(s["test_cluster"], 10**9)),
    "float cluster ids": lambda s: s.update(true_cluster=s["true_cluster"].astype(np.float64)),
    "inputs reshaped": lambda s: [s[k].update(x=s[k]["x"].reshape(len(s[k]["x"]), -1)) for k in ("train", "val",
                                                                                                  "test")],
    "another scenario": lambda s: s["info"].update(name="label-skew"),
    "another dataset": lambda s: s["info"].update(dataset="mnist"),
}


@pytest.mark.parametrize("craft", list(CACHE_CRAFTS))
def test_a_crafted_cache_is_seen_through_and_rebuilt(tmp_path: Path, craft: str) -> None:
    from fedcluster.config.run_config import resolve
    from fedcluster.data.build import cache_key, cache_path
    from fedcluster.storage.state_file import load_state, save_state

    cfg, typed = resolve(load_raw(None, ["num_clients=5", "seed=12"]))
    good = fedcluster.build_federation({"num_clients": 5, "seed": 12})
    path, key = cache_path(cfg, typed["scenario"]), cache_key(cfg, typed["scenario"])
    state = load_state(path, "federation", key)
    CACHE_CRAFTS[craft](state)
    save_state(path, state, "federation", key)
    err = io.StringIO()
    with redirect_stderr(err):
        fed = fedcluster.build_federation({"num_clients": 5, "seed": 12})
    assert "discarding it and building it again" in err.getvalue(), (craft, err.getvalue())
    assert fed.train.x.dtype == torch.float32 and fed.num_classes == good.num_classes
    assert fed.input_shape == good.input_shape and int(fed.test_cluster.max()) < 10


# -- the library API: a federation passed must be the config's, and config.yaml says what was used ---------------
@pytest.mark.parametrize("override", [{"dataset": "mixed-regression"}, {"scenario": "label-skew"},
                                      {"scenario.concepts": 2}, {"data_seed": 99}])
def test_run_refuses_a_config_that_names_other_data_than_the_federation(tmp_path: Path, override: dict) -> None:
    fed = fedcluster.build_federation({"num_clients": 6})
    key = next(iter(override)).split(".")[-1]
    with pytest.raises(ConfigError, match=f"{key}=.*does not fit the federation passed"):
        fedcluster.run({"rounds": 1, "progress": False, "out": str(tmp_path / "r"), **override}, federation=fed)


def test_a_run_on_a_federation_passed_resumes_on_the_same_data(tmp_path: Path) -> None:
    import yaml

    fed = fedcluster.build_federation({"num_clients": 6, "scenario.concepts": 2, "seed": 5})
    base = {"progress": False, "algorithm": "ifca"}
    fedcluster.run({**base, "rounds": 3, "out": str(tmp_path / "r")}, federation=fed)
    saved = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    assert saved["scenario_params"]["concepts"] == 2 and saved["data_seed"] == 5 and saved["seed"] == 0
    rc, err = outcome(["resume", str(tmp_path / "r"), "rounds=4", "progress=false"])
    assert rc == 0, err
    straight = fedcluster.run({**base, "rounds": 4, "out": str(tmp_path / "s")}, federation=fed)
    last = (tmp_path / "r" / "rounds.csv").read_text().splitlines()[-1].split(",")  # round 4, val_acc
    assert last[0] == "4" and float(last[1]) == pytest.approx(straight.rows[-1]["val_acc"], abs=1e-6)


def test_library_run_with_ranks_is_refused_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ranks=2"):
        fedcluster.run({"num_clients": 4, "rounds": 1, "progress": False, "out": str(tmp_path / "r")}, ranks=2)


# -- ranks=2 reporting ----------------------------------------------------------------------------------------------
def test_a_rank_aborted_by_gloo_is_not_blamed_for_its_killed_peer(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import signal
    from types import SimpleNamespace

    from fedcluster.app import launch

    fail = SimpleNamespace(failures={0: SimpleNamespace(exitcode=-signal.SIGABRT, timestamp=4),
                                     1: SimpleNamespace(exitcode=-signal.SIGKILL, timestamp=5)})
    assert launch._report_failure(fail, tmp_path) == 1
    assert capsys.readouterr().err.startswith("fedcluster: rank 1 was killed by SIGKILL")


@pytest.mark.slow  # two real ranks under torchrun's agent (about 30 s on 2 cores)
def test_the_launchers_last_line_is_fedclusters(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([sys.executable, "-m", "fedcluster", *RUN, "ranks=2", "client_momentum=keep",
                          f"out={tmp_path / 'r'}"], capture_output=True, text=True, env=env, timeout=300)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and lines[-1].startswith("fedcluster: error: client_momentum=keep"), res.stderr


# -- silent no-ops, now one line -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "needle"), [
    (["drop_last=true", "batch_size=100000"], "drop_last=true with batch_size=100000"),
    (["chunk_mb=1e308"], "chunk_mb"), (["chunk_mb=1e300"], "chunk_mb"),
    (["algorithm=fedem", f"algorithm.test_em_iters={2**40}"], "test_em_iters"),
    (["algorithm=fedrc", "algorithm.test_em_iters=100001"], "test_em_iters"),
])
def test_settings_that_did_nothing_or_ran_unbounded_are_one_line(tmp_path: Path, extra: list[str],
                                                                 needle: str) -> None:
    one_line([*RUN, *extra, f"out={tmp_path / 'r'}"], needle)


def test_a_checkpoint_that_is_a_symlink_loop_is_refused_not_restarted(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    (run / "checkpoint.pt").unlink()
    (run / "checkpoint.pt").symlink_to(run / "checkpoint.pt")
    before = (run / "rounds.csv").read_text()
    one_line(["resume", str(run), "rounds=3", "progress=false"], "checkpoint")
    assert (run / "rounds.csv").read_text() == before


@pytest.mark.parametrize("record", [{"round": 1, "concept": 3}, {"round": 1, "class": "x"},
                                    {"round": 1, "style": [1, 2]}, {"round": 1, "concept": None}])
def test_report_refuses_a_grouping_that_is_not_names_and_mass(finished: Path, tmp_path: Path,
                                                             record: dict) -> None:
    run = _copy(finished, tmp_path)
    (run / "clusters.jsonl").write_text(json.dumps(record) + "\n")
    one_line(["report", str(run)], "clusters.jsonl")


def test_flower_simulate_refuses_ranks_and_a_temporary_folder_too_long_for_ray(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("flwr")
    import tempfile

    one_line(["flower", "simulate", *RUN[1:], "ranks=2", f"out={tmp_path / 'r'}"], "ranks=2")
    assert not (tmp_path / "r").exists()
    long = tmp_path / ("t" * max(1, 60 - len(str(tmp_path))))
    long.mkdir()
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    one_line(["flower", "simulate", *RUN[1:], f"out={tmp_path / 'r2'}"], "TMPDIR")


# -- reproduce's stored results ----------------------------------------------------------------------------------
GOOD_STORED = {"name": "x", "budget": "small", "seeds": 2, "device": "cpu", "extra": [], "finished": False,
               "wall_seconds": 3.0, "date": "", "spec": "",
               "records": [{"seed": 0, "setting": "s", "method": "m", "metrics": {"acc": 0.5, "ari": None}}]}
STORED_CRAFTS = {
    "deep JSON": lambda d: "[" * 100_000 + "]" * 100_000, "a list": lambda d: [1, 2],
    "seeds text": lambda d: {**d, "seeds": "a"}, "seeds 1e30": lambda d: {**d, "seeds": 10**30},
    "seeds float": lambda d: {**d, "seeds": 1e30}, "unknown budget": lambda d: {**d, "budget": "huge"},
    "NaN wall": lambda d: {**d, "wall_seconds": float("nan")}, "records text": lambda d: {**d, "records": "abc"},
    "record list": lambda d: {**d, "records": [[1, 2]]},
    "record seed text": lambda d: {**d, "records": [{**d["records"][0], "seed": "0"}]},
    "metric text": lambda d: {**d, "records": [{**d["records"][0], "metrics": {"acc": "high"}}]},
    "unknown entry": lambda d: {**d, "x": 1}, "extra numbers": lambda d: {**d, "extra": [1]},
}


@pytest.mark.parametrize("craft", list(STORED_CRAFTS))
def test_reproduce_refuses_crafted_stored_results_in_one_line(tmp_path: Path, craft: str) -> None:
    from fedcluster.reproduce.results import Stored

    path = tmp_path / "x.json"
    path.write_text(json.dumps(GOOD_STORED))
    assert Stored.load(path).records == GOOD_STORED["records"]
    data = STORED_CRAFTS[craft](GOOD_STORED)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(UserError, match="x.json"):
        Stored.load(path)


def test_reproduce_refuses_a_folder_in_place_of_stored_results(tmp_path: Path) -> None:
    from fedcluster.reproduce.results import Stored

    (tmp_path / "x.json").mkdir()
    with pytest.raises(UserError, match="x.json"):
        Stored.load(tmp_path / "x.json")
