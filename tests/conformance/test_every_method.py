"""The checks every registered method passes, each method found from the registry (tests/conformance/methods.py):
it runs on a tiny federation and writes its run files, keeping its tensors on the run's device (a simulated
accelerator, tests/support/fake_device.py); the bytes in rounds.csv are what the round reported and within what its
cohort can have exchanged; its server state is the one cluster state; a run resumed from its checkpoint of round 1 is
the straight run bit for bit; and every value a crafted checkpoint could hold against a field's declared kind is
refused in one line naming the field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.engine.params import num_bytes
from fedcluster.tiers.cluster_state import ClusterState
from fedcluster.tracking.run_files import ROUND_COLUMNS
from tests.conformance.methods import (
    ROUNDS,
    SETTINGS,
    Played,
    checkpoint,
    names,
    play,
    refuses_crafted_values,
    rows,
    run_files,
)
from tests.support.fake_device import FakeDevice

METHODS = names()
_PLAYED: dict[str, Played] = {}  # one conformance run per method and session, shared by the checks


def played(name: str, tmp_path_factory: pytest.TempPathFactory) -> Played:
    if name not in _PLAYED:
        _PLAYED[name] = play(name, tmp_path_factory.mktemp(name))
    return _PLAYED[name]


@pytest.mark.parametrize("name", METHODS)
def test_runs_on_a_device_and_writes_its_run_files(name: str, strict_device: FakeDevice,
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Through the runner on the simulated accelerator: no host/device mixing and no device tensor read as NumPy,
    in construction, rounds, evaluation and checkpoints; then the run directory's files, one row per round."""
    p = _PLAYED[name] = play(name, tmp_path_factory.mktemp(name))
    assert not strict_device.problems, "\n".join(sorted(set(strict_device.problems)))
    for file in ("config.yaml", "rounds.csv", "clients.csv", "summary.json", "checkpoint.pt"):
        assert (p.out / file).is_file(), file
    reported = [res.clusters is not None for res in p.results]
    assert (p.out / "clusters.jsonl").is_file() == any(reported) and len(set(reported)) == 1
    got = rows(p.out)
    assert list(got[0])[:len(ROUND_COLUMNS)] == ROUND_COLUMNS
    assert [int(r["round"]) for r in got] == list(range(1, ROUNDS + 1))
    assert [int(r["num_clusters"]) for r in got] == [after for _, after in p.clusters]
    assert len(rows(p.out, "clients.csv")) == p.run.fed.num_clients
    if any(reported):
        assert [rec["round"] for rec in run_files(p.out)["clusters.jsonl"]] == list(range(1, ROUNDS + 1))
    assert int(checkpoint(p.out)["round"]) == ROUNDS


@pytest.mark.parametrize("name", METHODS)
def test_bytes_are_what_the_round_sent(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """rounds.csv holds each round's reported bytes as whole numbers; a method that communicates has every client
    of the cohort receive and send at least one model (a shared feature extractor and a head), and no more than
    one model per cluster, before or after the round's K change, and one more (a pre-training or a label table's
    worth) per client; a method that never communicates reports 0 in every round."""
    p = played(name, tmp_path_factory)
    got = rows(p.out)
    one = num_bytes({n: v[0] for n, v in p.run.alg.models.items()})
    communicates = any(r.bytes_up or r.bytes_down for r in p.results)
    for row, res, cohort, (before, after) in zip(got, p.results, p.cohorts, p.clusters, strict=True):
        assert (row["bytes_up"], row["bytes_down"]) == (str(res.bytes_up), str(res.bytes_down))
        assert isinstance(res.bytes_up, int | np.integer) and isinstance(res.bytes_down, int | np.integer)
        if not communicates:
            continue
        m, k = len(cohort), max(before, after)
        for key, sent in (("bytes_up", res.bytes_up), ("bytes_down", res.bytes_down)):
            assert m * one <= sent <= m * (k + 1) * one, (
                f"round {row['round']}: {key}={sent} is {sent / one:.3f} models for {m} clients and K={k}")


@pytest.mark.parametrize("name", METHODS)
def test_the_server_state_is_one_cluster_state(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    alg = played(name, tmp_path_factory).run.alg
    assert isinstance(alg.state, ClusterState)
    assert alg.models is alg.state.models and alg.omega is alg.state.omega
    alg.omega = alg.omega.copy()  # the attribute writes through to the state
    assert alg.state.omega is alg.omega


def _same(a: Any, b: Any, where: str = "") -> None:
    """Bit-for-bit equality of two saved states (tensors and arrays exactly, NaN where NaN)."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.nan_to_num(), b.nan_to_num()), where
        assert torch.equal(a.isnan(), b.isnan()) if a.is_floating_point() else True, where
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("name", METHODS)
def test_resumes_from_its_checkpoint_bit_for_bit(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The run directory as it was after round 1, resumed: every run file and the method's saved state equal the
    straight run's (times aside)."""
    p = played(name, tmp_path_factory)
    assert int(checkpoint(p.after_one)["round"]) == 1
    assert main(["resume", str(p.after_one), "progress=false"]) == 0
    assert run_files(p.after_one) == run_files(p.out)
    _same(checkpoint(p.after_one)["algorithm"], checkpoint(p.out)["algorithm"], "algorithm")


@pytest.mark.parametrize("name", METHODS)
def test_crafted_checkpoint_values_are_refused_in_one_line(name: str,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every saved field has a declared kind; for each, the values a hand-edited checkpoint with a valid checksum
    could hold (tests/bad_inputs/crafted_state.py) are refused in one line naming the field; the state as written
    passes."""
    p = played(name, tmp_path_factory)
    refuses_crafted_values(p.run, p.state, ROUNDS)


def test_the_settings_table_names_registered_methods_each_with_its_reason() -> None:
    assert set(SETTINGS) <= set(METHODS)
    assert all(keys and all("=" in k for k in keys) and reason for keys, reason in SETTINGS.values())
