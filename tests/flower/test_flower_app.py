"""fedcluster inside a user's own Flower app (docs/guide/flower.md, examples/flower-app): ClusteredStrategy in the
example's ServerApp and ClusteredClient in its ClientApp give the clusters and models of fedcluster's own run of
the same method on the same partitions, and the metrics the example's own evaluate function reports for them.

The fast tests play the Flower messages in this process (flower_local_grid); the Flower simulation of the example
is in test_flower_app_simulation.py, the loopback deployment in test_flower_app_deploy.py."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")
# the example app's own code (its model, loaders and evaluate) and the nodes' training run on the host by design
pytestmark = pytest.mark.host_only("the example Flower app trains and evaluates its own model on the host")

from fedcluster.errors import UserError  # noqa: E402
from fedcluster.flower import ClusteredClient, ClusteredStrategy  # noqa: E402
from fedcluster.flower.client import as_tensors  # noqa: E402
from fedcluster.tracking.run_dir import RunDir  # noqa: E402
from tests.support.flower_app_example import app_config, import_app, reference_run  # noqa: E402
from tests.support.flower_local_grid import LocalGrid, server_identity  # noqa: E402


def strategy_run(config: dict[str, Any]) -> tuple[ClusteredStrategy, Any]:
    app = import_app()
    with server_identity():
        return app.server_app.run(LocalGrid(app.client_app.app, int(config["min-nodes"])), config)


def weighted_eval_acc(states: list[dict[str, torch.Tensor]], clusters: list[int], num_partitions: int) -> float:
    """What the example's evaluate function gives each client for its cluster's model, weighted by its examples."""
    task = import_app().task
    correct = total = 0.0
    for p, k in enumerate(clusters):
        model = task.Net()
        model.load_state_dict(states[k])
        _, val = task.load_data(p, num_partitions)
        _, acc = task.test(model, val)
        correct, total = correct + acc * len(val.dataset), total + len(val.dataset)
    return correct / total


def assert_same_as_fedcluster(strategy: ClusteredStrategy, result: Any, config: dict[str, Any], out: Path) -> None:
    """Clusters, models (1e-5) and, per round, the number of clusters equal fedcluster's own run; the evaluation
    the strategy aggregated is the example's evaluate on each client's cluster model."""
    ref = assert_same_clusters_and_models(strategy.clusters, strategy.cluster_state_dicts(), config, out)
    assert [m["num-clusters"] for m in result.train_metrics_clientapp.values()] == \
        [int(r["num_clusters"]) for r in ref.rows]
    last = result.evaluate_metrics_clientapp[max(result.evaluate_metrics_clientapp)]
    assert_evaluation(last, strategy.cluster_state_dicts(), strategy.clusters, config)


def assert_same_clusters_and_models(clusters: list[int], states: list[dict[str, torch.Tensor]],
                                    config: dict[str, Any], out: Path) -> Any:
    """``clusters`` and the cluster models ``states`` are fedcluster's own run's (clients.csv, the last
    checkpoint's models to 1e-5); that run's result."""
    ref = reference_run(config, out)
    with (out / "clients.csv").open() as f:
        assert clusters == [int(row["cluster"]) for row in csv.DictReader(f)]
    models = RunDir(out).load_checkpoint()["algorithm"]["models"]
    assert len(states) == ref.summary["final"]["num_clusters"]
    for k, state in enumerate(states):
        for name, v in models.items():
            torch.testing.assert_close(state[name], v[k], rtol=0, atol=1e-5)
    return ref


def assert_evaluation(metrics: Any, states: list[dict[str, torch.Tensor]], clusters: list[int],
                      config: dict[str, Any]) -> None:
    assert metrics["eval_acc"] == pytest.approx(weighted_eval_acc(states, clusters, int(config["min-nodes"])),
                                                abs=1e-9)


def test_ifca_in_the_example_app_clusters_as_fedcluster_does(tmp_path: Path) -> None:
    config = app_config(**{"num-server-rounds": 2})
    strategy, result = strategy_run(config)
    assert_same_as_fedcluster(strategy, result, config, tmp_path / "ref")
    assert set(result.arrays) == {f"{k}.{n}" for k in range(3) for n in ("layers.1.weight", "layers.1.bias",
                                                                           "layers.3.weight", "layers.3.bias")}


@pytest.mark.slow
@pytest.mark.parametrize("method,params", [("fedrc", "num_clusters=3"), ("cfl", ""), ("fedavg", "")])
def test_other_methods_in_the_example_app(method: str, params: str, tmp_path: Path) -> None:
    config = app_config(**{"num-server-rounds": 2, "method": method, "method-params": params})
    strategy, result = strategy_run(config)
    assert_same_as_fedcluster(strategy, result, config, tmp_path / "ref")


def test_a_method_that_reads_inputs_on_the_server_is_refused() -> None:
    with pytest.raises(UserError, match="reads clients' inputs on the server"):
        strategy_run(app_config(**{"num-server-rounds": 1, "method": "pacfl", "method-params": ""}))
    with pytest.raises(UserError, match="formulation=joint .* reads every client's inputs on the server"):
        two_rounds("fedem", import_app().task.Net, {"formulation": "joint"})


def test_settings_are_checked_when_the_strategy_is_made() -> None:
    net = import_app().task.Net
    with pytest.raises(UserError, match="does not take learning_rate"):
        ClusteredStrategy("ifca", net, learning_rate=0.1)
    with pytest.raises(UserError, match="unknown algorithm 'ifcaa'"):
        ClusteredStrategy("ifcaa", net)
    with pytest.raises(UserError, match="num_clusters"):
        ClusteredStrategy("ifca", net, params={"num_clusters": 0})
    with pytest.raises(UserError, match="true cluster"):
        ClusteredStrategy("oracle", net)
    with pytest.raises(UserError, match="min_clients must be >= 1"):
        ClusteredStrategy("ifca", net, min_clients=0)
    with pytest.raises(UserError, match="timeout must be > 0"):
        ClusteredStrategy("ifca", net).start(grid=None, timeout=0)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not one global model"):
        ClusteredStrategy("ifca", net).start(grid=None, evaluate_fn=lambda r, a: None)  # type: ignore[arg-type]


def test_training_data_are_read_in_index_order() -> None:
    x, y = torch.arange(40.0).reshape(10, 4), torch.arange(10) % 3
    data = torch.utils.data.TensorDataset(x, y)
    for given in (torch.utils.data.DataLoader(data, batch_size=3, shuffle=True), data, (x, y)):
        got_x, got_y = as_tensors(given)
        assert torch.equal(got_x, x) and torch.equal(got_y, y)
    with pytest.raises(UserError, match="loader must yield"):
        as_tensors([{"img": x, "label": y}])
    with pytest.raises(UserError, match="empty"):
        as_tensors([])
    with pytest.raises(UserError, match="10 inputs and 9 targets"):
        as_tensors((x, y[:9]))
    with pytest.raises(UserError, match="task="):
        ClusteredClient(import_app().task.Net, lambda c: data, task="ranking")


def test_nodes_without_the_client_helper_are_named(tmp_path: Path) -> None:
    from flwr.clientapp import ClientApp

    config = app_config(**{"num-server-rounds": 1})
    app = import_app()
    with server_identity(), pytest.raises(UserError, match="register ClusteredClient"):
        app.server_app.run(LocalGrid(ClientApp(), int(config["min-nodes"])), config)


def test_client_order_follows_partition_ids() -> None:
    from fedcluster.flower.user_nodes import NodeReport, client_order

    reports = [NodeReport(9, 1, (2,), np.zeros(1)), NodeReport(3, 0, (2,), np.zeros(1))]
    assert [r.node for r in client_order(reports)] == [3, 9]
    reports = [NodeReport(9, -1, (2,), np.zeros(1)), NodeReport(3, -1, (2,), np.zeros(1))]
    assert [r.node for r in client_order(reports)] == [3, 9]


class CrashingGrid(LocalGrid):
    """The node of the last partition fails every training request (an error reply, as a crashed ClientApp's)."""

    def push_messages(self, messages: Any) -> Any:
        from flwr.app import Error, Message

        ids = []
        for msg in messages:
            if msg.metadata.message_type == "train.fedcluster" and msg.metadata.dst_node_id == max(self.contexts):
                msg.metadata.__dict__["_message_id"] = f"crash-{len(self.sent)}"
                self.sent.append(msg)
                self.replies[msg.metadata.message_id] = Message(Error(code=0, reason="crashed"), reply_to=msg)
                ids.append(msg.metadata.message_id)
            else:
                ids += list(super().push_messages([msg]))
        return ids


@pytest.mark.parametrize("min_clients,failed,skipped", [(1, 1.0, 0.0), (6, 1.0, 1.0)])
def test_a_failing_node_is_dropped_and_its_round_replayed(min_clients: int, failed: float, skipped: float) -> None:
    app = import_app()
    strategy = ClusteredStrategy("ifca", app.task.Net, params={"num_clusters": 2}, min_available_nodes=6,
                                 min_clients=min_clients, fraction_evaluate=0.0)
    with server_identity():
        result = strategy.start(grid=CrashingGrid(app.client_app.app, 6), num_rounds=1)  # type: ignore[arg-type]
    metrics = result.train_metrics_clientapp[1]
    assert (metrics["failed_clients"], metrics["skipped"]) == (failed, skipped)
    assert result.evaluate_metrics_clientapp == {}
    start = strategy.alg.ctx.fresh_models(2)  # type: ignore[union-attr]
    unchanged = all(torch.equal(start[n], v) for n, v in strategy.alg.models.items())  # type: ignore[union-attr]
    assert unchanged == bool(skipped)  # replayed: trained by the other clients; skipped: the models as they were


def split_net() -> torch.nn.Module:
    """The example's Net as a SplitModel (feature extractor and head), for the methods that work on them."""
    from torch import nn

    from fedcluster.models.base import SplitModel

    return SplitModel(nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU()), nn.Linear(32, 10))


def two_rounds(method: str, model_fn: Any, params: dict[str, Any] | None = None,
               client_model_fn: Any = None) -> ClusteredStrategy:
    """Two rounds of ``method`` on the example's partitions, the nodes' ClientApp a ClusteredClient of
    ``client_model_fn`` (default: the strategy's model_fn)."""
    from flwr.clientapp import ClientApp

    app = import_app()
    nodes = ClientApp()
    ClusteredClient(client_model_fn or model_fn, app.client_app.train_loader).register(nodes)
    strategy = ClusteredStrategy(method, model_fn, params=params, min_available_nodes=6, fraction_evaluate=0.0)
    with server_identity():
        strategy.start(grid=LocalGrid(nodes, 6), num_rounds=2)  # type: ignore[arg-type]
    return strategy


def test_nodes_with_another_model_are_named() -> None:
    with pytest.raises(UserError, match="another model than the strategy's"):
        two_rounds("ifca", import_app().task.Net, client_model_fn=split_net)


def test_a_method_on_feature_extractor_and_head_asks_for_a_split_model() -> None:
    with pytest.raises(UserError, match="SplitModel"):
        two_rounds("hcfl", import_app().task.Net)


# their server reads clients' inputs
SERVER_READS_INPUTS = {"apfl", "pfedme", "pacfl", "fedmd", "hcfl", "hcfl-plus", "fedgmm", "flux"}
NEEDS_SPLIT_MODEL = {"fedrc-adaptive", "hcfl-prime", "lcfed"}  # run with a SplitModel only
NEEDS_TRUE_CLUSTERS = {"oracle"}


@pytest.mark.slow
def test_every_method_runs_or_is_refused_in_one_line() -> None:
    from fedcluster.catalog.registry import ALGORITHMS

    ran, refused, split = [], [], []
    for method in ALGORITHMS.names():
        try:
            try:
                strategy = two_rounds(method, import_app().task.Net, {"delta": 1.0} if method == "fedmd" else None)
            except UserError as e:
                if "SplitModel" not in str(e):
                    raise
                strategy = two_rounds(method, split_net)
                split.append(method)
            assert len(strategy.clusters) == 6
            ran.append(method)
        except UserError as e:
            assert "\n" not in str(e)
            refused.append(method)
    assert set(refused) == SERVER_READS_INPUTS | NEEDS_TRUE_CLUSTERS, f"ran {ran}, refused {refused}"
    assert set(split) == NEEDS_SPLIT_MODEL
    assert len(ran) + len(refused) == len(ALGORITHMS.names())
