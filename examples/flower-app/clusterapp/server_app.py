"""The ServerApp: a fedcluster method as the strategy, its settings from the run config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Result
from safetensors.torch import save_file

from clusterapp.task import Net
from fedcluster.flower import ClusteredStrategy

app = ServerApp()


def method_params(text: str) -> dict[str, Any]:
    """``"num_clusters=3 tau=0.5"`` as {"num_clusters": 3, "tau": 0.5} (numbers as numbers)."""
    out: dict[str, Any] = {}
    for item in text.split():
        key, _, value = item.partition("=")
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def run(grid: Grid, config: dict[str, Any]) -> tuple[ClusteredStrategy, Result]:
    strategy = ClusteredStrategy(str(config["method"]), Net, params=method_params(str(config["method-params"])),
                                 lr=float(config["lr"]), batch_size=int(config["batch-size"]),
                                 local_epochs=int(config["local-epochs"]), seed=int(config["seed"]),
                                 min_available_nodes=int(config["min-nodes"]))
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(Net().state_dict()),
                            num_rounds=int(config["num-server-rounds"]))
    if config["out-dir"]:
        out = Path(str(config["out-dir"]))
        out.mkdir(parents=True, exist_ok=True)
        last = max(result.evaluate_metrics_clientapp, default=None)
        (out / "clusters.json").write_text(json.dumps({
            "clusters": strategy.clusters,  # client i (the i-th partition-id) -> its cluster
            "evaluation": dict(result.evaluate_metrics_clientapp[last]) if last else {}}))
        for k, state in enumerate(strategy.cluster_state_dicts()):
            save_file(state, str(out / f"cluster-{k}.safetensors"))
    return strategy, result


@app.main()
def main(grid: Grid, context: Context) -> None:
    run(grid, dict(context.run_config))
