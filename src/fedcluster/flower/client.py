"""The client side of :class:`~fedcluster.flower.strategy.ClusteredStrategy` for a user's own ClientApp: the user's
model and their own training data (a DataLoader, a Dataset or tensors), served with the in-process engine's
client code (engine.trainers.remote.serve), so a fedcluster method trains here exactly as in ``fedcluster run``.

::

    app = ClientApp()
    fedcluster_client = ClusteredClient(Net, lambda context: load_data(context.node_config["partition-id"])[0])
    fedcluster_client.register(app)      # train.fedcluster, query.fedcluster_losses, query.fedcluster_hello

    @app.evaluate()                      # the user's own evaluation, unchanged: it receives its cluster's model
    def evaluate(msg, context): ...

The training data are read once per process into two tensors, a DataLoader's dataset in index order (its
sampler and shuffling left out, its collate_fn kept); fedcluster draws its own seeded mini-batches from them (the
strategy's ``batch_size``), so the loader's batch size and shuffling do not change the training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.trainers.remote import Request, node_trainer, serve
from fedcluster.errors import UserError
from fedcluster.flower.app_messages import LABELS, NODE, RunSettings
from fedcluster.flower.records import to_record
from fedcluster.flower.user_nodes import parameter_layout
from fedcluster.flower.wire import ARRAYS, RUN, TASK

TrainData = Any  # a DataLoader or iterable of (x, y) batches, a Dataset of (x, y) pairs, or an (x, y) pair of tensors


def as_tensors(data: TrainData, task: str = "classification") -> tuple[torch.Tensor, torch.Tensor]:
    """The user's training data as (inputs, targets) tensors, in the order the data yield them."""
    if isinstance(data, tuple | list) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data):
        x, y = data
    else:
        batches = _batches(data)
        if not batches:
            raise UserError("the training data of this node are empty: load_train returned no samples")
        x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    if len(x) != len(y) or len(x) == 0:
        raise UserError(f"the training data hold {len(x)} inputs and {len(y)} targets: give as many of each (> 0)")
    x = x.detach().to(torch.float32).contiguous()
    y = y.detach().to(torch.int64 if task == "classification" else torch.float32).contiguous()
    return x, y


def in_order(data: TrainData) -> TrainData:
    """A map-style Dataset, or a DataLoader over one, read in index order (its own sampler and shuffling left
    out, its collate_fn kept): the rows, and so fedcluster's seeded batches, are the same on every load."""
    loader = torch.utils.data.DataLoader
    if isinstance(data, loader) and not isinstance(data.dataset, torch.utils.data.IterableDataset):
        return loader(data.dataset, batch_size=data.batch_size or 256, shuffle=False, collate_fn=data.collate_fn)
    if isinstance(data, torch.utils.data.Dataset) and not isinstance(data, torch.utils.data.IterableDataset):
        return loader(data, batch_size=256, shuffle=False)
    return data


def _batches(data: TrainData) -> list[tuple[torch.Tensor, torch.Tensor]]:
    data = in_order(data)
    if not isinstance(data, Iterable):
        raise UserError(f"load_train returned a {type(data).__name__}; return a DataLoader, a Dataset of (x, y) "
                        "pairs or an (x, y) pair of tensors")
    out = []
    for batch in data:
        if not isinstance(batch, tuple | list) or len(batch) != 2:
            kind = "a dict (map it to (x, y) pairs, e.g. with a collate_fn)" if isinstance(batch, dict) else \
                type(batch).__name__
            raise UserError(f"a training batch is {kind}; the loader must yield (inputs, targets) pairs")
        out.append((torch.as_tensor(batch[0]), torch.as_tensor(batch[1]).reshape(-1)))
    return out


@dataclass
class _NodeState:
    key: tuple[str, int]
    trainer: LocalTrainer
    siblings: dict[int, LocalTrainer] = field(default_factory=dict)


class ClusteredClient:
    """Answers :class:`~fedcluster.flower.strategy.ClusteredStrategy`'s requests with ``model_fn()`` (the user's
    ``nn.Module``; only its parameters are federated, not its buffers) on ``load_train(context)``'s data, which
    are kept and trained on ``device`` (e.g. "cuda")."""

    def __init__(self, model_fn: Callable[[], nn.Module], load_train: Callable[[Context], TrainData],
                 task: str = "classification", device: str | torch.device = "cpu") -> None:
        if task not in ("classification", "regression"):
            raise UserError(f"task={task!r}: choose 'classification' or 'regression'")
        try:
            self.device = torch.device(device)
        except RuntimeError:
            raise UserError(f"device={device!r} is not a device PyTorch knows (e.g. 'cpu', 'cuda')") from None
        self.model_fn, self.load_train, self.task = model_fn, load_train, task
        # per node id: one process may serve several nodes (the simulation's actors serve many virtual nodes)
        self._data: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._state: dict[int, _NodeState] = {}

    def register(self, app: ClientApp) -> None:
        """Add fedcluster's three message handlers to the user's ``app`` (its own train/evaluate stay as they are)."""
        app.train("fedcluster")(self.handle)
        app.query("fedcluster_losses")(self.handle)
        app.query("fedcluster_hello")(self.handle)

    def data(self, context: Context) -> tuple[torch.Tensor, torch.Tensor]:
        """This node's training tensors (loaded once per process)."""
        if context.node_id not in self._data:
            x, y = as_tensors(self.load_train(context), self.task)
            self._data[context.node_id] = x.to(self.device), y.to(self.device)
        return self._data[context.node_id]

    def handle(self, msg: Message, context: Context) -> Message:
        """The reply to any of fedcluster's messages."""
        if msg.metadata.message_type.endswith("fedcluster_hello"):
            return Message(self.hello(context), reply_to=msg)
        content = msg.content
        task = {k: v.item() if isinstance(v, np.generic) else v for k, v in dict(content.config_records[TASK]).items()}
        arrays = {k: v.numpy() for k, v in content.array_records[ARRAYS].items()}
        settings = RunSettings.of(str(content.config_records[RUN]["config"]))
        request = Request(str(task.pop("kind")), int(task.pop("client")), arrays, task)
        state = self._node_state(context, settings, request.client)
        reply = serve(state.trainer, request, state.siblings)
        return Message(RecordDict({"arrays": to_record(reply)}), reply_to=msg)

    def hello(self, context: Context) -> RecordDict:
        x, y = self.data(context)
        partition = context.node_config.get("partition-id", -1)
        node = ConfigRecord({"partition-id": int(partition), "samples": len(x),
                             "input-shape": [int(d) for d in x.shape[1:]],
                             "parameters": parameter_layout(self.model_fn())})
        return RecordDict({NODE: node, LABELS: ArrayRecord({"y": Array(y.cpu().numpy())})})

    def _node_state(self, context: Context, settings: RunSettings, client: int) -> _NodeState:
        key = (settings.text(), client)
        state = self._state.get(context.node_id)
        if state is None or state.key != key:
            if settings.task != self.task:
                raise UserError(f"the strategy runs a {settings.task} task, this ClientApp's ClusteredClient was "
                                f"made for {self.task}: give both the same task")
            x, y = self.data(context)
            torch.manual_seed(settings.seed)
            trainer = node_trainer(self.model_fn(), x, y, client, settings.num_clients, self.task, settings.seed,
                                   "sequential")
            state = self._state[context.node_id] = _NodeState(key, trainer)
        return state
