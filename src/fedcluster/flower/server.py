"""The ServerApp: the server side of any registered algorithm, with the clients' work sent to the nodes.

:class:`FlowerNodes` places the clients of the in-process :class:`~fedcluster.engine.runner.Run` (same round loop,
metrics, run directory, checkpoints) on the nodes: its backend is an
:class:`~fedcluster.engine.trainers.remote.RemoteTrainer` whose requests :class:`NodeLink` carries to the nodes, and
each round first drops the sampled clients whose
node is not connected; a round in which a node fails (error or no reply within ``timeout``) is replayed
from the state before it without that node, as long as ``min_clients`` remain (else it is skipped and the
models stay unchanged). ``rounds.csv`` gets ``failed_clients`` and ``skipped``; ``bytes_up``/``bytes_down``
are the bytes of the arrays actually sent (ArrayRecord sizes), not the method's nominal payload.

The server also builds the run's seeded federation: to evaluate (val/test accuracy, ARI), and for the
few server-side reads of client statistics (sizes, FedRC's label counts); see README "Running on Flower".
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from fedcluster.config.bounds import MAX_WAIT_SECONDS
from fedcluster.config.run_config import RunConfig
from fedcluster.data.federation import Federation
from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.placement import Placement
from fedcluster.engine.protocol import RoundResult, Trainer
from fedcluster.engine.runner import Run
from fedcluster.engine.trainers.remote import LOSSES, Arrays, ClientsFailed, RemoteTrainer, Request
from fedcluster.errors import ConfigError
from fedcluster.flower.records import RUN, from_record, request_content, wire_bytes

log = logging.getLogger("fedcluster.flower")


@dataclass
class FlowerOptions:
    """``flower.*`` keys: the fewest clients a round may run with and the reply timeout in seconds."""

    min_clients: int = 1
    timeout: float = 600.0

    def __post_init__(self) -> None:
        if self.min_clients < 1:
            raise ValueError(f"flower.min_clients must be >= 1, got {self.min_clients}")
        if not 0 < self.timeout <= MAX_WAIT_SECONDS:
            raise ValueError(f"flower.timeout must be > 0 and at most {MAX_WAIT_SECONDS} seconds (a week), got "
                             f"{self.timeout}")


def exchange(grid: Grid, messages: Iterable[Message], timeout: float, first_poll: float = 0.05,
             max_poll: float = 0.5) -> list[Message]:
    """``grid.send_and_receive`` with a shorter poll for the replies: ``first_poll`` seconds, x1.5 after each
    poll that brought nothing, at most ``max_poll`` or the grid's own ``pull_interval`` if it has one (the
    simulation's in-memory grid: 0.1 s); a SuperLink's grid polls every 3 s, which adds 1.5 s on average to
    every exchange. The replies that came within ``timeout`` seconds."""
    max_poll = min(max_poll, float(getattr(grid, "pull_interval", max_poll)))
    waiting = set(grid.push_messages(messages))
    end = time.monotonic() + timeout
    replies: list[Message] = []
    pause = min(first_poll, max_poll)
    while waiting:
        got = list(grid.pull_messages(waiting))
        replies += got
        waiting -= {m.metadata.reply_to_message_id for m in got}
        left = end - time.monotonic()
        if not waiting or left <= 0:
            break
        time.sleep(min(pause, left))
        pause = min(first_poll, max_poll) if got else min(pause * 1.5, max_poll)
    return replies


class NodeLink:
    """Which node holds which partition, and the request/reply traffic of a round."""

    train_type, losses_type = "train", "query.losses"  # the message types of the two kinds of request

    def __init__(self, grid: Grid, config_yaml: str, options: FlowerOptions) -> None:
        self.grid, self.config_yaml, self.options = grid, config_yaml, options
        self.node_of: dict[int, int] = {}  # partition id -> node id
        self.true_cluster: dict[int, int] = {}  # reported by the nodes, for scoring only
        self.round = 0
        self.bytes_up = self.bytes_down = 0
        self.errors: dict[int, str] = {}  # client -> the reason of its last error reply

    def refresh(self, round_: int) -> set[int]:
        """Forget nodes that left, greet new ones (a restarted node rejoins here); the live partitions."""
        self.round = round_
        nodes = set(self.grid.get_node_ids())
        self.node_of = {p: n for p, n in self.node_of.items() if n in nodes}
        new = sorted(nodes - set(self.node_of.values()))
        if new:
            content = RecordDict({RUN: ConfigRecord({"config": self.config_yaml})})
            msgs = [Message(content, n, "query.hello", group_id=f"hello-{round_}", ttl=self.options.timeout)
                    for n in new]
            for reply in exchange(self.grid, msgs, self.options.timeout):
                if reply.has_error():
                    log.warning("node %s did not answer hello: %s", reply.metadata.src_node_id, reply.error.reason)
                    continue
                rec = reply.content.config_records["node"]
                p = int(rec["partition-id"])
                if p in self.node_of:
                    log.warning("partition %d is served by two nodes; keeping the first", p)
                    continue
                self.node_of[p] = reply.metadata.src_node_id
                self.true_cluster[p] = int(rec["true-cluster"])
        return set(self.node_of)

    def send(self, requests: list[Request]) -> list[Arrays]:
        """Send every request to its client's node and wait (at most ``timeout``) for all replies."""
        failed = {r.client for r in requests if r.client not in self.node_of}
        msgs, client_of = [], {}
        for r in requests:
            if r.client in failed:
                continue
            node = self.node_of[r.client]
            content = request_content(r, self.config_yaml)
            self.bytes_down += wire_bytes(content)
            kind = self.losses_type if r.kind == LOSSES else self.train_type
            msgs.append(Message(content, node, kind, group_id=str(self.round), ttl=self.options.timeout))
            client_of[node] = r.client
        got: dict[int, Arrays] = {}
        for reply in exchange(self.grid, msgs, self.options.timeout):
            c = client_of.get(reply.metadata.src_node_id)
            if c is None:
                continue
            if reply.has_error():
                log.warning("client %d failed: %s", c, reply.error.reason)
                self.errors[c] = reply.error.reason
                continue
            self.bytes_up += wire_bytes(reply.content)
            got[c] = from_record(reply.content.array_records["arrays"])
        failed |= {r.client for r in requests if r.client not in got}
        if failed:
            raise ClientsFailed(failed)
        return [got[r.client] for r in requests]


class FlowerNodes(Placement):
    """The run loop's clients on Flower nodes (see the module docstring): ``Run(cfg, typed,
    placement=FlowerNodes(link))``."""

    where = "Flower, whose nodes each build and keep their own data,"

    def __init__(self, link: NodeLink) -> None:
        self.link = link
        self.true_cluster = np.zeros(0, dtype=np.int64)  # the server federation's tags, to check the nodes' against

    def trainer(self, module: torch.nn.Module, fed: Federation, cfg: RunConfig, path: str,
                device: torch.device) -> Trainer:
        if cfg.client_momentum == "keep":
            raise ConfigError("client_momentum=keep is not offered on Flower (the nodes keep no state between "
                              "rounds); use client_momentum=reset, or `fedcluster run`")
        tr = fed.train
        self.true_cluster = fed.true_cluster
        return RemoteTrainer(module, tr.x, tr.y, tr.ptr, fed.task, cfg.seed, self.link.send)

    def play_round(self, alg: Algorithm, t: int, clients: np.ndarray) -> RoundResult:
        cohort = np.asarray(clients, dtype=np.int64)
        live = self.link.refresh(t)
        other = sorted(p for p in live if self.link.true_cluster[p] != int(self.true_cluster[p]))
        if other:  # the tag is for scoring only, but a mismatch means the nodes hold other data than scored
            raise RuntimeError(f"the nodes of partitions {other} report another ground-truth cluster than the "
                               "server's federation: they were built from another config or data")
        failed = {int(c) for c in cohort if int(c) not in live}
        return replayed_round(alg, t, cohort, failed, self.link)


def replayed_round(alg: Algorithm, t: int, cohort: np.ndarray, failed: set[int], link: NodeLink) -> RoundResult:
    """Round ``t`` of ``alg`` with the ``cohort`` less its ``failed`` clients; a round in which more clients fail is
    replayed from the state before it without them, or skipped (models unchanged) when fewer than
    ``link.options.min_clients`` are left. ``rounds.csv``'s ``failed_clients`` and ``skipped`` are in its extra."""
    before = copy.deepcopy(alg.state_dict())
    link.bytes_up = link.bytes_down = 0
    skipped = 0.0
    while True:
        active = cohort[[int(c) not in failed for c in cohort]]
        if len(active) < link.options.min_clients:
            log.warning("round %d: %d of %d clients left (< flower.min_clients=%d); round skipped", t + 1,
                        len(active), len(cohort), link.options.min_clients)
            alg.load_state_dict(copy.deepcopy(before))
            res, skipped = RoundResult(bytes_up=0, bytes_down=0), 1.0
            break
        try:
            res = alg.run_round(t, active)
            break
        except ClientsFailed as e:
            log.warning("round %d: clients %s failed; replaying the round without them", t + 1, sorted(e.clients))
            failed |= e.clients
            alg.load_state_dict(copy.deepcopy(before))
    res.bytes_up, res.bytes_down = link.bytes_up, link.bytes_down
    res.extra.update(failed_clients=float(len(failed)), skipped=skipped)
    return res


def serve_run(grid: Grid, config_yaml: str, options: FlowerOptions) -> dict[str, Any]:
    """The ServerApp's body: resolve the config, run every round, write the run directory."""
    from fedcluster.flower.node_work import resolve_text

    cfg, typed = resolve_text(config_yaml)
    link = NodeLink(grid, config_yaml, options)
    run = Run(cfg, typed, placement=FlowerNodes(link))
    return run.execute()
