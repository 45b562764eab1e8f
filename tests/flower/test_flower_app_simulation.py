"""The example Flower app of docs/guide/flower.md in Flower's Simulation Engine (Ray; one virtual SuperNode per
partition): with its own run config it finds the three rotation groups, and its clusters, models and evaluation
equal fedcluster's own run of the same method on the same partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

from tests.flower.test_flower_app import assert_same_as_fedcluster  # noqa: E402
from tests.support.flower_app_example import app_config, import_app  # noqa: E402

# Ray's start and a ClientApp per message: about a minute on 2 cores
pytestmark = [pytest.mark.slow, pytest.mark.host_only("the example Flower app trains and evaluates its own "
                                                                   "model on the host")]


def test_example_app_in_flower_simulation(tmp_path: Path) -> None:
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from fedcluster.flower.commands import check_ray_temp_dir
    from fedcluster.flower.simulation import quiet_simulation

    check_ray_temp_dir()
    app = import_app()
    config = app_config()
    outcome: dict[str, Any] = {}
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Any) -> None:  # the example's main with its pyproject.toml run config
        outcome["strategy"], outcome["result"] = app.server_app.run(grid, config)

    with quiet_simulation():
        run_simulation(server, app.client_app.app, num_supernodes=int(config["min-nodes"]),
                       backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                       "init_args": {"include_dashboard": False}})
    strategy = outcome["strategy"]
    groups = [app.task.group_of(p) for p in range(int(config["min-nodes"]))]
    pairs = {(g, k) for g, k in zip(groups, strategy.clusters, strict=True)}
    assert len(pairs) == len(set(groups)) == len(set(strategy.clusters)), strategy.clusters  # one cluster per group
    assert_same_as_fedcluster(strategy, outcome["result"], config, tmp_path / "ref")
