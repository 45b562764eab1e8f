"""The run store: a finished run kept under a key of everything that decides its result, read back by any
experiment (or later call) that needs the same run, refused when the key differs; crafted files refused in one
line; runs as the work units of ``--workers``, with ``--time-limit``."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.config.run_config import RunConfig
from fedcluster.errors import UserError
from fedcluster.reproduce import run_suite
from fedcluster.reproduce.experiments import get
from fedcluster.reproduce.parallel import next_part, parts, run_parts
from fedcluster.reproduce.run_common import config
from fedcluster.reproduce.run_store import NOT_RESULT_KEYS, RunStore, federation_digest, from_run, run_key
from fedcluster.reproduce.spec import Method

NAME = "s4-ablation-tehc-trhc"  # FedRC, TeHC, TrHC; one setting


def _tiny(name: str = NAME):  # type: ignore[no-untyped-def]
    exp = get(name).trimmed("tiny")
    return exp, exp.budget("tiny")


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Count the runs trained (the real ones still run)."""
    calls: list[list[str]] = []
    real = run_suite.execute

    def counted(overrides, fed):  # type: ignore[no-untyped-def]
        calls.append(list(overrides))
        return real(overrides, fed)

    monkeypatch.setattr(run_suite, "execute", counted)
    return calls


def test_a_second_experiment_reads_the_runs_it_shares_and_trains_only_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp, budget = _tiny()
    store = RunStore(tmp_path / "runs")
    calls = _counting(monkeypatch)
    first: list[dict] = []
    run_suite.run(exp, budget, 0, ["threads=1"], set(), first.append, store)
    assert len(calls) == len(exp.methods) and not any(r["reused"] for r in first)
    assert len(store.keys()) == len(exp.methods) == len({r["run"] for r in first})

    # another experiment: FedRC as the first one ran it, and FedRC at another learning rate
    other = replace(exp, name="another", methods=(exp.methods[0], Method("FedRC lr 0.02", (
        *exp.methods[0].overrides, "lr=0.02"))))
    calls.clear()
    second: list[dict] = []
    run_suite.run(other, budget, 0, ["threads=1"], set(), second.append, store)
    assert len(calls) == 1 and "lr=0.02" in calls[0]  # the shared run is read, the other is trained
    assert [r["reused"] for r in second] == [True, False]
    assert second[0]["metrics"] == first[0]["metrics"] and second[0]["curve"] == first[0]["curve"]
    assert second[0]["run"] == first[0]["run"] and second[1]["run"] not in {r["run"] for r in first}


def test_a_stored_run_gives_the_record_a_fresh_run_gives(tmp_path: Path) -> None:
    exp, budget = _tiny()
    one: list[dict] = []
    run_suite.run(exp, budget, 1, ["threads=1"], set(), one.append, None)  # no store: every run trained
    two: list[dict] = []
    store = RunStore(tmp_path / "runs")
    run_suite.run(exp, budget, 1, ["threads=1"], set(), two.append, store)
    three: list[dict] = []
    run_suite.run(exp, budget, 1, ["threads=1"], set(), three.append, store)  # every run read back
    assert all(r["reused"] for r in three)
    for a, b, c in zip(one, two, three, strict=True):
        assert a["metrics"] == b["metrics"] == c["metrics"] and a["curve"] == b["curve"] == c["curve"]


def _base() -> RunConfig:
    return config(["algorithm=fedrc", "num_clients=12", "rounds=3"])[0]


CHANGES = {"algorithm": "ifca", "dataset": "fashion-mnist", "scenario": "label-swap", "model": "cnn",
           "num_clients": 13, "clients_per_round": 0.5, "rounds": 4, "local_epochs": 2, "batch_size": 64,
           "drop_last": True, "lr": 0.05, "momentum": 0.9, "client_momentum": "keep", "weight_decay": 1e-4,
           "global_lr": 0.5, "seed": 1, "data_seed": 3, "data_dir": "/elsewhere", "test_fit": "all",
           "normalize": True, "eval_every": 2, "eval_train": True, "device": "cuda", "precision": "bf16",
           "channels_last": True, "deterministic": True, "algorithm_params": {"num_clusters": 4},
           "scenario_params": {"concepts": 2}, "model_params": {"hidden": [64]}}


def test_every_result_setting_changes_the_key_and_nothing_else_does() -> None:
    base = _base()
    key = run_key(base, "f")
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(CHANGES) | NOT_RESULT_KEYS == fields  # every key is either result-relevant (tested here) or not
    for name, value in CHANGES.items():
        assert run_key(replace(base, **{name: value}), "f") != key, name
    for name in NOT_RESULT_KEYS:
        assert run_key(replace(base, **{name: getattr(base, name) or 1 if name != "out" else "/x"}), "f") == key
    assert run_key(base, "another federation") != key


def test_a_methods_own_version_changes_its_keys_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Raising one method's version retrains that method's runs (a new key) and leaves every other key as it was."""
    from fedcluster.reproduce import run_store

    ifca, clove = replace(_base(), algorithm="ifca"), replace(_base(), algorithm="clove")
    before = {"ifca": run_key(ifca, "f"), "clove": run_key(clove, "f")}
    monkeypatch.setitem(run_store.METHOD_VERSIONS, "clove", run_store.METHOD_VERSIONS["clove"] + 1)
    assert run_key(ifca, "f") == before["ifca"]
    assert run_key(clove, "f") != before["clove"]
    monkeypatch.setitem(run_store.METHOD_VERSIONS, "ifca", 1)  # version 1: the key of a method never raised
    assert run_key(ifca, "f") == before["ifca"]


def test_one_changed_sample_changes_the_federation_digest() -> None:
    from fedcluster.reproduce.run_common import federation

    fed = federation(["num_clients=6", "seed=0"])
    digest = federation_digest(fed)
    assert federation_digest(federation(["num_clients=6", "seed=0"])) == digest
    fed.train.x[3, 0] += 1e-3
    assert federation_digest(fed) != digest
    fed.train.x[3, 0] -= 1e-3
    fed.val.y[0] = (fed.val.y[0] + 1) % 10
    assert federation_digest(fed) != digest


def test_a_run_under_another_key_is_not_read(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    rows = [{"round": 1.0, "val_acc": 0.5, "test_acc": math.nan, "seconds": 3.0}]
    summary = {"final": {"val_acc": 0.5, "ari": math.nan}, "best": {"val_acc": {"value": 0.5, "round": 1}},
               "at_best_val": {"val_acc": 0.5}, "max_clusters": 3, "run_dir": "/somewhere"}
    key = run_key(_base(), "f")
    store.put(from_run(key, summary, rows, 1.0))
    got = store.get(key)
    assert got is not None and got.rows[0]["val_acc"] == 0.5 and math.isnan(got.rows[0]["test_acc"])
    assert "seconds" not in got.rows[0] and "run_dir" not in got.summary and math.isnan(got.summary["final"]["ari"])
    assert store.get(run_key(replace(_base(), lr=0.2), "f")) is None


@pytest.mark.parametrize("crafted", [
    "[]", '{"key": "K"}', "not json", '{"key": "OTHER", "version": 1, "seconds": 1, "summary": {}, "rounds": '
    '{"round": [1]}}', '{"key": "K", "version": 99, "seconds": 1, "summary": {}, "rounds": {"round": [1]}}',
    '{"key": "K", "version": 1, "seconds": 1, "summary": {}, "rounds": {"round": [1], "val_acc": [true]}}',
    '{"key": "K", "version": 1, "seconds": 1, "summary": {}, "rounds": {"round": [1, 2], "val_acc": [1]}}',
    '{"key": "K", "version": 1, "seconds": 1, "summary": {"final": {"val_acc": "high"}}, "rounds": {"round": [1]}}',
    '{"key": "K", "version": 1, "seconds": 1, "summary": {"best": {"val_acc": 0.5}}, "rounds": {"round": [1]}}',
    '{"key": "K", "version": 1, "seconds": 1, "summary": {"code": {}}, "rounds": {"round": [1]}}',
    "[" * 100_000])
def test_a_crafted_stored_run_is_refused_in_one_line(tmp_path: Path, crafted: str) -> None:
    store = RunStore(tmp_path)
    path = store.path("K")
    path.parent.mkdir(parents=True)
    path.write_text(crafted)
    with pytest.raises(UserError, match="the stored run .* is unusable .*: move it aside") as e:
        store.get("K")
    assert "\n" not in str(e.value)


def test_a_run_read_at_its_partners_round_waits_for_the_partner() -> None:
    exp = get("s4-table1-fmnist")
    split = parts(exp, {0: set(), 1: {("", "FedRC")}}, by_run=True)
    assert {p.left for p in split} == {1} and len(split) == 2 * len(exp.methods) - 1
    ft0 = next(p for p in split if p.seed == 0 and p.method == "FedRC-FT")
    ft1 = next(p for p in split if p.seed == 1 and p.method == "FedRC-FT")
    assert ft0.after == {(0, "", "FedRC")} and ft1.after == frozenset()  # seed 1's FedRC is stored already
    unfinished = {(0, "", "FedRC")}
    assert next_part([ft0], {}, unfinished) is None and next_part([ft0, ft1], {}, unfinished) == ft1
    assert next_part([ft0], {}, set()) == ft0


@pytest.mark.host_only(reason="its worker processes run outside the simulated accelerator")
def test_the_time_limit_ends_the_workers_and_keeps_every_finished_record() -> None:
    """The limit goes off (here: once seed 0's records are in) while a worker sleeps in seed 2's run: the workers are
    ended at once and every record that arrived was kept."""
    from fedcluster.reproduce.running import TimeLimit

    exp = get("s3-mixture-kappa")  # the stand-in runner sleeps 60 s in every part of seed 2
    got: list[dict] = []
    cut: list[float] = []

    def keep(record: dict) -> None:
        got.append(record)
        if len(got) == len(exp.pairs()):  # seed 0 complete: a worker is in seed 2's minute-long run by now
            cut.append(time.monotonic())
            raise TimeLimit

    with pytest.raises(TimeLimit):
        run_parts("tests.support.reproduce_fake_runner:sleepy_run", exp.name, "small",
                  parts(exp, {0: set(), 2: set()}), [], keep, 2)
    assert time.monotonic() - cut[0] < 30  # not the sleeping worker's minute: it was ended
    assert {r["seed"] for r in got} == {0} and len(got) == len(exp.pairs())


@pytest.mark.host_only(reason="its worker processes run outside the simulated accelerator")
def test_two_workers_with_a_time_limit_store_every_run_and_the_next_call_trains_none_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pages"
    command = ["reproduce", NAME, "--budget", "tiny", "--seeds", "2", "--out", str(out), "--set", "threads=1",
               "--workers", "2", "--time-limit", "30"]
    assert main(command) == 0
    records = json.loads((out / f"{NAME}.json").read_text())["records"]
    store = RunStore(out / "store")
    assert len(records) == 2 * len(get(NAME).trimmed("tiny").methods) and {r["run"] for r in records} == store.keys()
    capsys.readouterr()
    (out / f"{NAME}.json").unlink()  # the records gone, the runs kept: nothing is trained again
    assert main([*command[:-2], "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert f"({len(records)} runs read from the run store, not trained again)" in err
    page = (out / f"{NAME}.md").read_text()
    assert f"Judged from {len(records)} stored run(s)" in page


def test_the_store_option_names_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["reproduce", NAME, "--budget", "tiny", "--store", str(tmp_path / "file" / "x")]) == 2
    assert "--store" in capsys.readouterr().err


def test_the_digest_reads_tensors_on_any_device() -> None:
    from fedcluster.reproduce.run_common import federation

    fed = federation(["num_clients=6"])
    assert isinstance(fed.train.x, torch.Tensor) and len(federation_digest(fed)) == 32
