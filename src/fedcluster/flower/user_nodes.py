"""The server's view of a user's Flower federation for :class:`~fedcluster.flower.strategy.ClusteredStrategy`: which
node is which client (:class:`UserNodeLink`, on :class:`~fedcluster.flower.server.NodeLink`'s request traffic) and
the federation the method reads (:func:`label_federation`): every client's number of samples and its training
targets, as the nodes report them, and none of their inputs."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from fedcluster.data.federation import Federation, Split
from fedcluster.data.sharded import ShardedSplit
from fedcluster.engine.trainers.remote import Arrays, ClientsFailed, Request
from fedcluster.errors import UserError
from fedcluster.flower.app_messages import HELLO_TYPE, LABELS, LOSSES_TYPE, NODE, TRAIN_TYPE
from fedcluster.flower.server import FlowerOptions, NodeLink, exchange
from fedcluster.flower.wire import RUN

log = logging.getLogger("fedcluster.flower")


@dataclass
class NodeReport:
    """What a node's hello says: its node id, its ``partition-id`` (-1 without one), its input shape and targets."""

    node: int
    partition: int
    input_shape: tuple[int, ...]
    y: np.ndarray
    parameters: tuple[str, ...] = ()  # "name:shape" of the node's model's parameters


def greet(grid: Grid, nodes: list[int], timeout: float, round_: int) -> list[NodeReport]:
    """The hello replies of ``nodes`` (those that answered within ``timeout``)."""
    content = RecordDict({RUN: ConfigRecord({"config": ""})})
    msgs = [Message(content, n, HELLO_TYPE, group_id=f"fedcluster-hello-{round_}", ttl=timeout) for n in nodes]
    out = []
    for reply in exchange(grid, msgs, timeout):
        node = reply.metadata.src_node_id
        if reply.has_error():
            log.warning("node %s did not answer fedcluster's hello (is ClusteredClient registered on its "
                        "ClientApp?): %s", node, reply.error.reason)
            continue
        rec = reply.content.config_records[NODE]
        y = reply.content.array_records[LABELS]["y"].numpy()
        out.append(NodeReport(node, int(rec["partition-id"]), tuple(int(d) for d in rec["input-shape"]), y,
                              tuple(str(p) for p in rec.get("parameters", []))))
    return out


def parameter_layout(module: torch.nn.Module) -> list[str]:
    """``name:shape`` of every parameter, as a node's hello reports its model's."""
    return [f"{n}:{'x'.join(str(d) for d in v.shape)}" for n, v in module.named_parameters()]


def check_same_model(reports: list[NodeReport], module: torch.nn.Module) -> None:
    """One line when a node's model (its ClusteredClient's model_fn) is not the strategy's."""
    mine = tuple(parameter_layout(module))
    for r in reports:
        if r.parameters != mine:
            other = sorted(set(r.parameters) ^ set(mine))[:3]
            raise UserError(f"node {r.node} (partition-id {r.partition}) has another model than the strategy's "
                            f"model_fn (parameters differing: {', '.join(other) or 'their order'}): give "
                            "ClusteredClient and ClusteredStrategy the same model")


def client_order(reports: list[NodeReport]) -> list[NodeReport]:
    """Client i of the run: the node of the i-th smallest ``partition-id`` when every node has a distinct one (the
    simulation and ``--node-config partition-id=N`` give them), else of the i-th smallest node id."""
    parts = [r.partition for r in reports]
    if min(parts, default=-1) >= 0 and len(set(parts)) == len(parts):
        return sorted(reports, key=lambda r: r.partition)
    return sorted(reports, key=lambda r: r.node)


class UserNodeLink(NodeLink):
    """:class:`NodeLink` for a user's ClientApps (fedcluster's own message types); a node that rejoins under a new
    node id takes back its client when it reports the same ``partition-id``."""

    train_type, losses_type = TRAIN_TYPE, LOSSES_TYPE

    def __init__(self, grid: Grid, settings_text: str, options: FlowerOptions, clients: list[NodeReport]) -> None:
        super().__init__(grid, settings_text, options)
        self.node_of = {i: r.node for i, r in enumerate(clients)}
        self.client_of_partition = {r.partition: i for i, r in enumerate(clients) if r.partition >= 0}

    def send(self, requests: list[Request]) -> list[Arrays]:
        """:meth:`NodeLink.send`; when every client answers with an error, the ClientApps cannot do this work
        (a method that needs what the model or data lack): one line with the first reason, not a skipped round."""
        self.errors = {}
        try:
            return super().send(requests)
        except ClientsFailed as e:
            if e.clients == {r.client for r in requests} and e.clients <= set(self.errors):
                reason = self.errors[min(e.clients)]
                hint = ("; this method works on the model's feature extractor and head: make model_fn return a "
                        "fedcluster.models.base.SplitModel(body, head)") if any(
                    f"attribute {q}{part}{q}" in reason for part in ("body", "head") for q in "'`") else ""
                raise UserError(f"every client failed this request, e.g. client {min(e.clients)}: "
                                f"{reason.splitlines()[0] if reason else 'no reason given'}{hint}") from None
            raise

    def refresh(self, round_: int) -> set[int]:
        self.round = round_
        nodes = set(self.grid.get_node_ids())
        self.node_of = {c: n for c, n in self.node_of.items() if n in nodes}
        new = sorted(nodes - set(self.node_of.values()))
        for report in greet(self.grid, new, self.options.timeout, round_) if new else []:
            client = self.client_of_partition.get(report.partition)
            if client is None or client in self.node_of:
                log.warning("node %s (partition-id %d) is not one of the run's clients; it gets no work",
                            report.node, report.partition)
                continue
            self.node_of[client] = report.node
        return set(self.node_of)


def label_federation(clients: list[NodeReport], num_classes: int, task: str) -> Federation:
    """The federation the method reads on the server: the clients' sizes and targets, no inputs (reading one raises
    ``NotHeldError``); no validation or test rows and no ground-truth clusters (evaluation is the nodes')."""
    shapes = {r.input_shape for r in clients}
    if len(shapes) != 1:
        raise UserError(f"the nodes report inputs of different shapes {sorted(shapes)}: every client's training "
                        "inputs must have one shape")
    shape = shapes.pop()
    sizes = [len(r.y) for r in clients]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ydtype = torch.int64 if task == "classification" else torch.float32
    y = torch.cat([torch.as_tensor(r.y).to(ydtype) for r in clients])
    if task == "classification" and len(y) and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise UserError(f"the nodes' labels span {int(y.min())}..{int(y.max())} but the model has {num_classes} "
                        "outputs: labels must be 0..outputs-1")
    n = len(clients)
    no_rows = torch.zeros((0, *shape))
    train = ShardedSplit(no_rows, y, ptr, np.zeros(n, dtype=bool))
    val = Split(no_rows, torch.zeros(0, dtype=ydtype), np.zeros(n + 1, dtype=np.int64))
    test = Split(no_rows, torch.zeros(0, dtype=ydtype), np.zeros(1, dtype=np.int64))
    return Federation(train, val, test, np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64),  # type: ignore[arg-type]
                      num_classes if task == "classification" else 0, task,  # type: ignore[arg-type]
                      info={"name": "flower-app"})
