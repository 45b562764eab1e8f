"""The ClientApp: fedcluster's training handlers on this node's own data, and the app's own evaluation."""

from __future__ import annotations

from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from clusterapp.task import Net, load_data, test
from fedcluster.flower import ClusteredClient

app = ClientApp()


def train_loader(context: Context):  # noqa: ANN201 - the node's training DataLoader
    return load_data(int(context.node_config["partition-id"]), int(context.node_config["num-partitions"]))[0]


# local training and per-sample losses for the strategy's method, with this app's model and data
ClusteredClient(Net, train_loader).register(app)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """The app's own evaluation: the model it receives is its cluster's (msg.content["config"]["cluster"])."""
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    _, val = load_data(int(context.node_config["partition-id"]), int(context.node_config["num-partitions"]))
    loss, acc = test(model, val)
    metrics = MetricRecord({"eval_loss": loss, "eval_acc": acc, "num-examples": len(val.dataset)})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
