"""Flower's Simulation Runtime (Ray backend) with fedcluster's ServerApp and ClientApp in this process.

Flower 1.41 marks ``flwr.simulation.run_simulation`` deprecated in favour of ``flwr run`` against a local
SuperLink that ``flwr`` starts in the background and leaves running (fixed ports, a state database under
``$FLWR_HOME``). ``run_simulation`` is still the only in-process simulation API: it returns the run's
summary here, starts nothing that outlives the command and needs no free port, so it stays, and its
deprecation notice is filtered (that one message only).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from fedcluster.flower.node import client_app
from fedcluster.flower.server import FlowerOptions, serve_run

DEPRECATION_NOTICE = "`run_simulation` function is deprecated"


class _DropRunSimulationNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return DEPRECATION_NOTICE not in record.getMessage()


@contextmanager
def quiet_simulation() -> Iterator[None]:
    """Without Flower's ``run_simulation`` deprecation notice, and with Ray's coming default for actors that
    ask for no GPU (``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0``: Ray leaves ``CUDA_VISIBLE_DEVICES`` alone;
    nodes train on the CPU, so nothing changes but Ray's FutureWarning, printed on every run, goes away)."""
    flwr_logger = logging.getLogger("flwr")
    drop = _DropRunSimulationNotice()
    flwr_logger.addFilter(drop)
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    try:
        yield
    finally:
        flwr_logger.removeFilter(drop)


def simulate(config_yaml: str, options: FlowerOptions, num_nodes: int, gpu_fraction: float = 0.0,
             cpus_per_client: float = 1.0) -> dict[str, Any] | None:
    """Run the config on ``num_nodes`` virtual SuperNodes (partition-id 0..num_nodes-1); the run summary."""
    result: dict[str, Any] = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        result.update(serve_run(grid, config_yaml, options))

    resources: dict[str, Any] = {"num_cpus": cpus_per_client, "num_gpus": gpu_fraction}
    with quiet_simulation():
        run_simulation(server_app, client_app, num_supernodes=num_nodes,
                       backend_config={"client_resources": resources, "init_args": {"include_dashboard": False}})
    return result or None
