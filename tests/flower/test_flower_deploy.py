"""Flower deployment on loopback: a real SuperLink and SuperNodes as subprocesses (``--insecure``), runs
submitted with ``fedcluster flower serve``; their models and assignments equal the in-process engine's.

One deployment serves the whole module, and the runs of every selected test are submitted together when
it is up: the SuperLink runs them side by side, each SuperNode answers their messages one at a time. Most
of a run is Flower starting processes (``flwr run``, a ServerApp, and a ``flwr-clientapp`` per message on
every node) and polling; side by side, one run's work fills the others' waits."""

from __future__ import annotations

import csv
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run
from tests.support.flower_cluster import Cluster, final_models

pytest.importorskip("flwr")
# ~3 min of real SuperLink/SuperNode processes: out of the default suite, run by CI as a command of its own
pytestmark = pytest.mark.slow

BASE = ["dataset=digits", "scenario=concept-swap", "num_clients=3", "rounds=3", "model=mlp", "model.hidden=[16]",
        "progress=false", "seed=3"]
ALGORITHMS = {"fedavg": ["algorithm=fedavg"], "ifca": ["algorithm=ifca"], "fedrc": ["algorithm=fedrc"]}
# a reply may wait behind the other runs' messages on its node; the tests assert that no client failed
TIMEOUT = ["flower.timeout=300"]
Submitted = dict[str, tuple[subprocess.Popen, Path]]  # run name -> (fedcluster flower serve, its run dir)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("flower"))
    try:
        c.start_link()
        for i in range(3):
            c.start_node(i)
        yield c
    finally:
        c.close()


def _run_name(item: pytest.Item) -> str | None:
    """The run a test of this module checks (None for another module's test)."""
    if getattr(getattr(item, "module", None), "__name__", None) != __name__:
        return None
    callspec = getattr(item, "callspec", None)
    return callspec.id if callspec is not None else "fedavg"


@pytest.fixture(scope="module")
def submitted(cluster: Cluster, request: pytest.FixtureRequest) -> Submitted:
    """``fedcluster flower serve`` of every selected test's run, all started now."""
    names = {_run_name(item) for item in request.session.items} - {None}
    out = {}
    for name in (n for n in ALGORITHMS if n in names):
        run_dir = cluster.tmp / f"run-{name}"
        proc = cluster.serve_async([*BASE, *ALGORITHMS[name], f"out={run_dir}", *TIMEOUT], name=f"serve-{name}")
        out[name] = (proc, run_dir)
    return out


def _clients(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "clients.csv").open() as f:
        return list(csv.DictReader(f))


def _rounds(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "rounds.csv").open() as f:
        return list(csv.DictReader(f))


def check_equal_to_in_process(cluster: Cluster, submitted: Submitted, tmp_path: Path, name: str) -> Path:
    """Run ``name`` in process (while the Flower runs go on), then compare with its Flower run; its run dir."""
    local_dir = tmp_path / "local"
    cfg, typed = resolve(load_raw(None, [*BASE, *ALGORITHMS[name], f"out={local_dir}"]))
    Run(cfg, typed).execute()
    proc, flower_dir = submitted[name]
    try:
        code = proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        code = None
    assert code == 0, f"flower serve exit status {code}:\n" + cluster.log_tail(f"serve-{name}")
    remote, local = final_models(flower_dir), final_models(local_dir)
    assert remote.keys() == local.keys()
    for key, v in local.items():
        torch.testing.assert_close(remote[key], v, atol=1e-5, rtol=1e-5)
    assert [r["cluster"] for r in _clients(flower_dir)] == [r["cluster"] for r in _clients(local_dir)]
    fr, lr = _rounds(flower_dir), _rounds(local_dir)
    assert len(fr) == len(lr) == 3
    for a, b in zip(fr, lr, strict=True):
        for key in ("val_acc", "test_acc", "ari", "num_clusters"):
            assert float(a[key]) == pytest.approx(float(b[key]), abs=1e-5), key
        assert float(a["failed_clients"]) == 0 and int(a["bytes_down"]) > 0 and int(a["bytes_up"]) > 0
    return flower_dir


def test_fedavg_on_superlink_equals_in_process(cluster: Cluster, submitted: Submitted, tmp_path: Path) -> None:
    flower_dir = check_equal_to_in_process(cluster, submitted, tmp_path, "fedavg")
    # bytes on the wire: one model down and one up per client and round, plus npy headers and names
    params = sum(v[0].numel() * 4 for v in final_models(flower_dir).values())
    for row in _rounds(flower_dir):
        for key in ("bytes_up", "bytes_down"):
            assert params < int(row[key]) / 3 < params + 2048, (key, row[key], params)


# in the default suite (issue 12)
@pytest.mark.parametrize("name", ["ifca", "fedrc"])
def test_clustered_on_superlink_equals_in_process(cluster: Cluster, submitted: Submitted, tmp_path: Path,
                                                  name: str) -> None:
    check_equal_to_in_process(cluster, submitted, tmp_path, name)
