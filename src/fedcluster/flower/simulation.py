"""Flower's Simulation Runtime (Ray backend) with fedcluster's ServerApp and ClientApp in this process."""

from __future__ import annotations

from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from fedcluster.flower.node import client_app
from fedcluster.flower.server import FlowerOptions, serve_run


def simulate(config_yaml: str, options: FlowerOptions, num_nodes: int, gpu_fraction: float = 0.0,
             cpus_per_client: float = 1.0) -> dict[str, Any] | None:
    """Run the config on ``num_nodes`` virtual SuperNodes (partition-id 0..num_nodes-1); the run summary."""
    result: dict[str, Any] = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        result.update(serve_run(grid, config_yaml, options))

    resources: dict[str, Any] = {"num_cpus": cpus_per_client, "num_gpus": gpu_fraction}
    run_simulation(server_app, client_app, num_supernodes=num_nodes,
                   backend_config={"client_resources": resources, "init_args": {"include_dashboard": False}})
    return result or None
