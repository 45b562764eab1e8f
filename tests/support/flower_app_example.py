"""The example Flower app of docs/guide/flower.md (examples/flower-app) for the tests: its modules, its run config,
and fedcluster's own in-process run of the same method on the same partitions, for comparison."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

APP = Path(__file__).resolve().parents[2] / "examples" / "flower-app"
MODEL = "flower-example-net"  # the example's Net, registered while a reference run needs it


def app_config(**overrides: Any) -> dict[str, Any]:
    """The example's run config ([tool.flwr.app.config] of its pyproject.toml) with ``overrides``."""
    config = tomllib.loads((APP / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    return {**config, **overrides}


def import_app() -> Any:
    """The example's package ``clusterapp`` (its folder put on sys.path)."""
    if str(APP) not in sys.path:
        sys.path.insert(0, str(APP))
    import clusterapp.client_app
    import clusterapp.server_app
    import clusterapp.task

    return clusterapp


@contextmanager
def registered_model() -> Iterator[str]:
    """The example's ``Net`` as a registered fedcluster model while the block runs."""
    from fedcluster.catalog.registry import MODELS

    net = import_app().task.Net
    MODELS.add(MODEL, lambda input_shape, output_dim, params: net(), "the Flower example's Net")
    try:
        yield MODEL
    finally:
        MODELS._entries.pop(MODEL, None)


def example_federation(num_partitions: int) -> Any:
    """The example's partitions as a fedcluster federation: train/val as its loaders split them, one test client
    per rotation group (the validation rows of that group's first partition), the group as the true cluster."""
    from fedcluster.data.federation import Federation, Split

    task = import_app().task
    parts = [task.partition_arrays(p, num_partitions) for p in range(num_partitions)]
    cuts = [int(0.8 * len(y)) for _, y in parts]
    train = Split.from_parts([x[:c] for (x, _), c in zip(parts, cuts, strict=True)],
                             [y[:c] for (_, y), c in zip(parts, cuts, strict=True)])
    val = Split.from_parts([x[c:] for (x, _), c in zip(parts, cuts, strict=True)],
                           [y[c:] for (_, y), c in zip(parts, cuts, strict=True)])
    first = [next(p for p in range(num_partitions) if task.group_of(p) == g) for g in range(task.GROUPS)]
    test = Split.from_parts([val.client(p)[0].numpy() for p in first], [val.client(p)[1].numpy() for p in first])
    groups = np.array([task.group_of(p) for p in range(num_partitions)])
    return Federation(train, val, test, groups, np.arange(task.GROUPS), num_classes=10)


def reference_run(config: dict[str, Any], out: Path) -> Any:
    """fedcluster's own run (``fedcluster.run``) of the config's method on the example's partitions."""
    import fedcluster

    server = import_app().server_app
    fed = example_federation(int(config["min-nodes"]))
    with registered_model() as model:
        return fedcluster.run({"algorithm": {"name": config["method"], **server.method_params(config["method-params"])},
                               "model": model, "engine": "sequential", "rounds": int(config["num-server-rounds"]),
                               "lr": float(config["lr"]), "batch_size": int(config["batch-size"]),
                               "local_epochs": int(config["local-epochs"]), "seed": int(config["seed"]),
                               "progress": False, "out": str(out)}, federation=fed)
