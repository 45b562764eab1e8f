"""The Flower app that ``flwr run`` starts on a SuperLink: ``server_app`` reads the run config written by
``fedcluster flower serve`` (the resolved fedcluster config and the ``flower.*`` options)."""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcluster.flower.node import client_app
from fedcluster.flower.server import FlowerOptions, serve_run

server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    serve_run(grid, str(rc["config"]), FlowerOptions(int(rc["min-clients"]), float(rc["timeout"])))


__all__ = ["client_app", "server_app"]
