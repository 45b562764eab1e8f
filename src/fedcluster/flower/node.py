"""The ClientApp: a node answers the server's requests with the in-process engine's client code on its own
partition (:mod:`fedcluster.flower.node_work`).

A node is started with ``partition-id`` in its node config (``flower-supernode --node-config
"partition-id=3"``; the simulation sets it for every virtual node). The run's resolved config comes with
every message; the node builds the same seeded federation, keeps only its partition's training rows and
reports its partition id and, for scoring only, its ground-truth cluster (``query.hello``).

A SuperNode starts a fresh ``flwr-clientapp`` process for every message. Under ``fedcluster flower node``
(which sets ``FEDCLUSTER_NODE_WORKER``) that process only forwards the message to the node's warm worker,
which has PyTorch imported and the partition built already; otherwise (simulation, a bare
``flower-supernode``) it does the work itself. This module imports neither PyTorch nor the engine.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fedcluster.flower.wire import ARRAYS, RUN, TASK, WORKER_ENV, recv_frame, send_frame

client_app = ClientApp()


def ask_worker(path: str, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None
               ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One request to the warm worker at ``path``; raises RuntimeError with the worker's error."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        send_frame(sock, header, arrays)
        reply, reply_arrays = recv_frame(sock)
    if "error" in reply:
        raise RuntimeError(f"node worker: {reply['error']}")
    return reply, reply_arrays


def _scalar(v: object) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _hello(partition: int, config_yaml: str) -> dict[str, int]:
    worker = os.environ.get(WORKER_ENV)
    if worker:
        return ask_worker(worker, {"op": "hello", "partition": partition, "config": config_yaml})[0]["hello"]
    from fedcluster.flower import node_work

    return node_work.hello(partition, config_yaml)


def _reply_arrays(partition: int, content: RecordDict) -> dict[str, np.ndarray]:
    task = {k: _scalar(v) for k, v in dict(content.config_records[TASK]).items()}
    arrays = {k: v.numpy() for k, v in content.array_records[ARRAYS].items()}
    config_yaml = str(content.config_records[RUN]["config"])
    worker = os.environ.get(WORKER_ENV)
    if worker:
        header = {"op": "work", "partition": partition, "config": config_yaml, "task": task}
        return ask_worker(worker, header, arrays)[1]
    from fedcluster.flower import node_work

    return node_work.work(partition, task, arrays, config_yaml)


@client_app.query("hello")
def hello(msg: Message, context: Context) -> Message:
    partition = int(context.node_config["partition-id"])
    info = _hello(partition, str(msg.content.config_records[RUN]["config"]))
    return Message(RecordDict({"node": ConfigRecord({"partition-id": int(info["partition-id"]),
                                                      "true-cluster": int(info["true-cluster"])})}), reply_to=msg)


def _work(msg: Message, context: Context) -> Message:
    reply = _reply_arrays(int(context.node_config["partition-id"]), msg.content)
    record = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in reply.items()})
    return Message(RecordDict({"arrays": record}), reply_to=msg)


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    return _work(msg, context)


@client_app.query("losses")
def losses(msg: Message, context: Context) -> Message:
    return _work(msg, context)
