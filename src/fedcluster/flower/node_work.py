"""A node's work on its partition: build the run's seeded federation from the resolved config, keep this
partition's training rows, answer ``hello`` and the clients' requests with the in-process engine's client
code (engine.trainers.remote.serve). Run either in the ClientApp process itself or, kept warm across messages, in
the ``fedcluster flower node`` process (:mod:`fedcluster.flower.worker`)."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.trainers.remote import Arrays, Request, node_trainer, serve
from fedcluster.engine.training.kernels import auto_path


@dataclass
class NodeData:
    partition: int
    true_cluster: int
    trainer: LocalTrainer
    siblings: dict[int, LocalTrainer] = field(default_factory=dict)


_CACHE: dict[tuple[str, int], NodeData] = {}


def resolve_text(config_yaml: str):  # noqa: ANN201 - (RunConfig, typed params)
    """(RunConfig, typed params) of a resolved config's YAML text."""
    from fedcluster.config.run_config import load_raw, resolve

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.yaml"
        path.write_text(config_yaml)
        return resolve(load_raw(path, []))


def node_data(partition: int, config_yaml: str) -> NodeData:
    """This node's partition of the run's federation and its trainer (cached per config)."""
    from fedcluster.data.build import build_federation
    from fedcluster.models.base import build_model

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
        trainer = node_trainer(module, x.clone(), y.clone(), partition, fed.num_clients, fed.task, cfg.seed, path,
                               cfg.channels_last)
        _CACHE.clear()  # one run at a time per node process
        _CACHE[key] = NodeData(partition, int(fed.true_cluster[partition]), trainer)
    return _CACHE[key]


def hello(partition: int, config_yaml: str) -> dict[str, int]:
    data = node_data(partition, config_yaml)
    return {"partition-id": data.partition, "true-cluster": data.true_cluster}


def work(partition: int, task: dict[str, Any], arrays: Arrays, config_yaml: str) -> Arrays:
    """The reply to one request (``task``: its ``kind``, ``client`` and scalar settings)."""
    task = dict(task)
    request = Request(str(task.pop("kind")), int(task.pop("client")), arrays, task)
    data = node_data(partition, config_yaml)
    if request.client != data.partition:
        raise ValueError(f"request for client {request.client} reached the node of partition {data.partition}")
    return serve(data.trainer, request, data.siblings)
