"""Run any fedcluster method on Flower (``flwr``): a ServerApp with the method's server side and a ClientApp
with the in-process engine's client work (engine.trainers.remote), for simulations and real deployments; or,
inside a user's own Flower app, :class:`ClusteredStrategy` (the method as a strategy) with
:class:`ClusteredClient` (the user's model and data on each node).

The two are loaded on first use: a ``flwr-clientapp`` process that imports ``fedcluster.flower.apps`` stays
light."""

from __future__ import annotations

from typing import Any

__all__ = ["ClusteredClient", "ClusteredStrategy"]


def __getattr__(name: str) -> Any:
    if name == "ClusteredStrategy":
        from fedcluster.flower.strategy import ClusteredStrategy

        return ClusteredStrategy
    if name == "ClusteredClient":
        from fedcluster.flower.client import ClusteredClient

        return ClusteredClient
    raise AttributeError(f"module 'fedcluster.flower' has no attribute {name!r}")
