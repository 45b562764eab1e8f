"""The ClientApp: a node answers the server's requests with the in-process engine's client code
(engine.protocol.serve) on its own partition.

A node is started with ``partition-id`` in its node config (``flower-supernode --node-config
"partition-id=3"``; the simulation sets it for every virtual node). The run's resolved config comes with
every message; the node builds the same seeded federation, keeps only its partition's training rows and
reports its partition id and, for scoring only, its ground-truth cluster (``query.hello``).
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fedcluster.engine.protocol import node_trainer, serve
from fedcluster.engine.training import Trainer, auto_path
from fedcluster.flower.records import RUN, content_request, to_record

client_app = ClientApp()


@dataclass
class NodeData:
    partition: int
    true_cluster: int
    trainer: Trainer
    siblings: dict[int, Trainer] = field(default_factory=dict)


_CACHE: dict[tuple[str, int], NodeData] = {}


def resolve_text(config_yaml: str):
    """(RunConfig, typed params) of a resolved config's YAML text."""
    from fedcluster.config import load_raw, resolve

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.yaml"
        path.write_text(config_yaml)
        return resolve(load_raw(path, []))


def node_data(context: Context, config_yaml: str) -> NodeData:
    """This node's partition of the run's federation and its trainer (cached per config)."""
    from fedcluster.data.build import build_federation
    from fedcluster.models.base import build_model

    partition = int(context.node_config["partition-id"])
    key = (hashlib.sha256(config_yaml.encode()).hexdigest(), partition)
    if key not in _CACHE:
        cfg, typed = resolve_text(config_yaml)
        fed = build_federation(cfg, typed["scenario"])
        if not 0 <= partition < fed.num_clients:
            raise ValueError(f"partition-id {partition} is outside 0..{fed.num_clients - 1}")
        if cfg.threads is not None:
            torch.set_num_threads(cfg.threads)
        module = build_model(cfg.model, fed.input_shape, fed.output_dim, typed["model"])
        path = auto_path(cfg.model, "cpu", cfg.precision) if cfg.engine == "auto" else cfg.engine
        path = "sequential" if path == "pool" else "vectorized" if path == "pool-vectorized" else path
        x, y = fed.train.client(partition)
        trainer = node_trainer(module, x.clone(), y.clone(), partition, fed.num_clients, fed.task, cfg.seed, path)
        _CACHE.clear()  # one run at a time per node process
        _CACHE[key] = NodeData(partition, int(fed.true_cluster[partition]), trainer)
    return _CACHE[key]


@client_app.query("hello")
def hello(msg: Message, context: Context) -> Message:
    data = node_data(context, str(msg.content.config_records[RUN]["config"]))
    return Message(RecordDict({"node": ConfigRecord({"partition-id": data.partition,
                                                      "true-cluster": data.true_cluster})}), reply_to=msg)


def _work(msg: Message, context: Context) -> Message:
    request, config_yaml = content_request(msg.content)
    data = node_data(context, config_yaml)
    if request.client != data.partition:
        raise ValueError(f"request for client {request.client} reached the node of partition {data.partition}")
    reply: ArrayRecord = to_record(serve(data.trainer, request, data.siblings))
    return Message(RecordDict({"arrays": reply}), reply_to=msg)


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    return _work(msg, context)


@client_app.query("losses")
def losses(msg: Message, context: Context) -> Message:
    return _work(msg, context)
