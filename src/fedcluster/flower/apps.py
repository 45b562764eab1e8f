"""The Flower app that ``flwr run`` starts on a SuperLink: ``server_app`` reads the run config written by
``fedcluster flower serve`` (the resolved fedcluster config and the ``flower.*`` options).

Flower loads ``client_app`` from this module in a fresh ``flwr-clientapp`` process for every message a
SuperNode receives, so importing it must stay light: the server side (the run loop, evaluation, plots:
scikit-learn, SciPy, matplotlib) is imported only when the ServerApp runs.
"""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcluster.flower.node import client_app

server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    from fedcluster.flower.server import FlowerOptions, serve_run

    rc = context.run_config
    serve_run(grid, str(rc["config"]), FlowerOptions(int(rc["min-clients"]), float(rc["timeout"])))


__all__ = ["client_app", "server_app"]
