"""The example Flower app of docs/guide/flower.md on a real federation on loopback: a SuperLink and one bare
``flower-supernode`` per partition (``--node-config partition-id=N num-partitions=M``, as a user starts them),
the app submitted with ``flwr run examples/flower-app``; its clusters, models and evaluation equal fedcluster's
own run of the same method on the same partitions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fedcluster.flower.commands import write_connection
from tests.flower.test_flower_app import assert_evaluation, assert_same_clusters_and_models
from tests.support.flower_app_example import APP, app_config
from tests.support.flower_cluster import BIN, Cluster, free_port

pytest.importorskip("flwr")
# real SuperLink/SuperNode processes, a flwr-clientapp per message: minutes
pytestmark = [pytest.mark.slow, pytest.mark.host_only("the example Flower app trains and evaluates its own "
                                                                   "model on the host")]
NODES = 3


def test_example_app_on_loopback(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    cluster = Cluster(tmp_path)
    out = tmp_path / "app-out"
    overrides = {"num-server-rounds": 2, "min-nodes": NODES}
    try:
        cluster.start_link()
        for p in range(NODES):
            cluster._start(f"node{p}", [f"{BIN}/flower-supernode", "--insecure", "--superlink", cluster.address,
                                        "--node-config", f"partition-id={p} num-partitions={NODES}",
                                        "--port", str(free_port())])
        write_connection(Path(cluster.env["FLWR_HOME"]), cluster.address, True, None)
        run_config = " ".join([f'out-dir="{out}"', *(f"{k}={v}" for k, v in overrides.items())])
        done = subprocess.run([f"{BIN}/flwr", "run", str(APP), "fedcluster", "--stream", "--run-config", run_config],
                              env=cluster.env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
        logs = done.stdout[-4000:] + done.stderr[-2000:] + cluster.log_tail("node0", 3000)
        assert done.returncode == 0 and (out / "clusters.json").is_file(), logs
    finally:
        cluster.close()
    saved = json.loads((out / "clusters.json").read_text())
    states = [load_file(str(out / f"cluster-{k}.safetensors")) for k in range(len(list(out.glob("cluster-*"))))]
    config = app_config(**overrides)
    assert_same_clusters_and_models(saved["clusters"], states, config, tmp_path / "ref")
    assert_evaluation(saved["evaluation"], states, saved["clusters"], config)
