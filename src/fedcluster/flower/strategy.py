"""Any registered fedcluster method as a Flower strategy in a user's own ServerApp::

    strategy = ClusteredStrategy("ifca", Net, params={"num_clusters": 3}, lr=0.05, batch_size=32)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(Net().state_dict()), num_rounds=10)
    strategy.assignment          # node id -> cluster;  strategy.cluster_state_dicts(): the K models

The method runs unchanged, unaware of Flower: its server side here, driven round by round through
:func:`~fedcluster.flower.server.replayed_round` (the same fault handling as ``fedcluster flower serve``), and its
clients' work (local training, E-step losses) sent as engine.trainers.remote requests to the user's ClientApps,
where :class:`~fedcluster.flower.client.ClusteredClient` answers them with the user's model and data. A
fedcluster round is not one configure/aggregate exchange (IFCA asks for losses and then for training; CFL trains,
then splits), so the strategy runs its rounds in :meth:`ClusteredStrategy.start`, as Flower's own ``start`` does.

The server learns each client's number of samples and its training targets (the node's hello), never its inputs;
a method setting that reads clients' inputs on the server is refused. After every round each node's ClientApp
receives its cluster's model in a plain ``evaluate`` message (the user's own evaluate function; the config also
carries ``cluster``), and the replies' metrics are averaged weighted by ``num-examples``, as Flower's FedAvg does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords
from torch import nn

from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.run_config import RunConfig, load
from fedcluster.data.sharded import NotHeldError
from fedcluster.engine.algorithm import Algorithm, Context
from fedcluster.engine.params import Params, get_params, stack
from fedcluster.engine.sampling import participation_stream
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.remote import RemoteTrainer
from fedcluster.errors import UserError
from fedcluster.flower.app_messages import CLUSTER_KEY, RunSettings
from fedcluster.flower.server import FlowerOptions, exchange, replayed_round
from fedcluster.flower.user_nodes import UserNodeLink, check_same_model, client_order, greet, label_federation
from fedcluster.models.base import SplitModel

log = logging.getLogger("fedcluster.flower")
RUN_KEYS = ("lr", "local_epochs", "batch_size", "momentum", "weight_decay", "global_lr", "drop_last", "seed",
            "clients_per_round")  # the run settings a strategy takes (fedcluster run's keys of the same names)
NEEDS_GROUND_TRUTH = ("oracle",)  # methods that read the true clusters, which a user's federation does not have


@contextmanager
def method_errors(method: str, module: nn.Module) -> Iterator[None]:
    """One line, not an error from inside the method, when ``method`` reads clients' inputs on the server (PACFL's
    subspaces, FedMD's moment descent) or works on a plain ``nn.Module``'s feature extractor and head separately
    (HCFL, FedRC-adaptive: they need a SplitModel)."""
    try:
        yield
    except NotHeldError:
        raise UserError(f"{method} with these parameters reads clients' inputs on the server, which a Flower app's "
                        "server does not have; choose another method or setting") from None
    except AttributeError as e:
        if isinstance(module, SplitModel) or not any(part in str(e) for part in ("'body'", "'head'", "'features'")):
            raise
        raise UserError(f"{method} works on the model's feature extractor and head separately: make model_fn "
                        "return a fedcluster.models.base.SplitModel(body, head), whose forward is head(body(x))"
                        ) from None


class ModelContext(Context):
    """The run context with the user's ``model_fn`` for the method's fresh models, seeded as
    :meth:`Context.fresh_models` seeds the registered models (the same seed gives the same models as a run of
    ``fedcluster run`` with the same model registered)."""

    model_fn: Callable[[], nn.Module]

    def fresh_models(self, k: int, stream: int = 0) -> Params:
        gen_state = torch.random.get_rng_state()
        models = []
        with torch.device("cpu"):
            for i in range(k):
                torch.manual_seed(int(np.random.default_rng([self.cfg.seed, 3, stream, i]).integers(2**31)))
                models.append(get_params(self.model_fn()))
        torch.random.set_rng_state(gen_state)
        return {n: v.to(self.device) for n, v in stack(models).items()}


def method_config(method: str, params: Mapping[str, Any] | None, settings: Mapping[str, Any], num_clients: int,
                  rounds: int) -> tuple[RunConfig, dict[str, Any]]:
    """The validated run config and typed parameters of ``method`` with ``params`` (``fedcluster list METHOD``)."""
    unknown = sorted(set(settings) - set(RUN_KEYS))
    if unknown:
        raise UserError(f"ClusteredStrategy does not take {', '.join(unknown)}; its run settings are "
                        f"{', '.join(RUN_KEYS)} (a method's own parameters go in params=)")
    if method in NEEDS_GROUND_TRUTH:
        raise UserError(f"{method} reads every client's true cluster, which a Flower app's data do not have; "
                        "choose another method")
    return load({"algorithm": {"name": method, **dict(params or {})}, **dict(settings),
                 "num_clients": num_clients, "rounds": rounds, "engine": "sequential", "progress": False})


def flower_options(min_clients: int, timeout: float) -> FlowerOptions:
    """``min_clients`` and the reply ``timeout`` checked as ``flower.min_clients`` and ``flower.timeout`` are."""
    try:
        return FlowerOptions(int(min_clients), float(timeout))
    except ValueError as e:
        raise UserError(str(e).replace("flower.min_clients", "min_clients").replace("flower.timeout", "timeout")
                        ) from None


class ClusteredStrategy(Strategy):
    """The fedcluster method ``method`` (a registered name: ``fedcluster list``) with its ``params`` and the run
    ``settings`` (lr, local_epochs, batch_size, momentum, weight_decay, global_lr, drop_last, seed,
    clients_per_round) on the nodes whose ClientApp registers a :class:`~fedcluster.flower.client.ClusteredClient`
    (module docstring). ``min_available_nodes``: nodes to wait for before the run starts (every node connected by
    then is a client); ``min_clients``: fewest clients a round may run with after failures (else it is skipped);
    ``fraction_evaluate``: the share of clients evaluated after each round (0: none)."""

    def __init__(self, method: str, model_fn: Callable[[], nn.Module], params: Mapping[str, Any] | None = None, *,
                 task: str = "classification", min_available_nodes: int = 2, min_clients: int = 1,
                 fraction_evaluate: float = 1.0, **settings: Any) -> None:
        if task not in ("classification", "regression"):
            raise UserError(f"task={task!r}: choose 'classification' or 'regression'")
        if not 0 <= fraction_evaluate <= 1:
            raise UserError(f"fraction_evaluate={fraction_evaluate}: give a share in [0, 1]")
        if min_available_nodes < 1:
            raise UserError(f"min_available_nodes={min_available_nodes}: give at least 1")
        flower_options(min_clients, 1.0)
        method_config(method, params, settings, max(min_available_nodes, 2), 1)  # refuse bad settings now
        self.method, self.model_fn, self.params, self.settings = method, model_fn, dict(params or {}), dict(settings)
        self.task, self.min_available_nodes, self.min_clients = task, min_available_nodes, min_clients
        self.fraction_evaluate = fraction_evaluate
        self.alg: Algorithm | None = None
        self.nodes: list[int] = []  # client i's node id (at the start of the run)

    # -- what a run leaves ----------------------------------------------------------------------------
    @property
    def assignment(self) -> dict[int, int]:
        """Each client's cluster (its Ω row's largest entry), by the node id it had at the start."""
        return dict(zip(self.nodes, self.clusters, strict=True))

    @property
    def clusters(self) -> list[int]:
        """Client i's cluster, the clients in the order of their nodes' ``partition-id`` (else node id). A client
        that never trained (``clients_per_round`` < 1) has the cluster of its Ω row as the method started it: the
        rule ``fedcluster run`` applies to it reads its data, which the server does not have."""
        if self.alg is None:
            return []
        try:
            return [int(k) for k in self.alg.assignment()]
        except NotHeldError:
            return [int(k) for k in self.alg.omega.argmax(1)]

    def cluster_state_dicts(self) -> list[dict[str, torch.Tensor]]:
        """The K models as state dicts of ``model_fn()`` (its buffers as a fresh model has them)."""
        if self.alg is None:
            return []
        return [self._state_dict(k) for k in range(self.alg.num_clusters)]

    def _state_dict(self, k: int) -> dict[str, torch.Tensor]:
        assert self.alg is not None
        sd = self.model_fn().state_dict()
        for name, v in self.alg.models.items():
            sd[name] = v[k].detach().cpu().clone()
        return sd

    # -- Flower's Strategy interface ---------------------------------------------------------------------
    def summary(self) -> None:
        log.info("ClusteredStrategy: fedcluster method %s %s, settings %s", self.method, self.params, self.settings)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
                        ) -> Iterable[Message]:
        raise NotImplementedError("ClusteredStrategy plays each round's exchanges in start(); call start()")

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        raise NotImplementedError("ClusteredStrategy plays each round's exchanges in start(); call start()")

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
                           ) -> Iterable[Message]:
        """One ``evaluate`` message per evaluated client: its cluster's model and ``config`` with ``cluster``."""
        assert self.alg is not None
        live = sorted(self.link.refresh(server_round - 1))
        count = int(round(self.fraction_evaluate * len(live)))
        if count == 0:
            return []
        rng = np.random.default_rng([int(self.cfg.seed), 7, server_round])
        chosen = sorted(rng.choice(live, size=count, replace=False)) if count < len(live) else live
        assign = self.clusters
        out = []
        for c in chosen:
            k = int(assign[c])
            settings = ConfigRecord({**dict(config), CLUSTER_KEY: k, "server-round": server_round})
            content = RecordDict({"arrays": ArrayRecord(self._state_dict(k)), "config": settings})
            out.append(Message(content, self.link.node_of[c], "evaluate", group_id=f"evaluate-{server_round}",
                               ttl=self.link.options.timeout))
        return out

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """The replies' metrics averaged with weights ``num-examples`` (Flower's FedAvg rule)."""
        records = []
        for r in replies:
            if r.has_error():
                log.warning("evaluate on node %s failed: %s", r.metadata.src_node_id, r.error.reason)
            elif r.content.metric_records:
                records.append(r.content)
        if not records:
            return None
        return aggregate_metricrecords(records, "num-examples")

    def start(self, grid: Grid, initial_arrays: ArrayRecord | None = None, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None) -> Result:
        """Run ``num_rounds`` rounds of the method; ``initial_arrays`` (optional) is only checked against
        ``model_fn()``'s parameters: the method makes its own K starting models, seeded by ``seed``. The result's
        ``arrays`` hold the K models as ``"{k}.{name}"``; its train metrics per round are the number of clusters,
        the bytes sent and the method's own ``rounds.csv`` columns."""
        if evaluate_fn is not None:
            raise UserError("ClusteredStrategy has K models, not one global model: evaluate on the clients (each "
                            "receives its cluster's model), or use cluster_state_dicts() after the run")
        if train_config is not None and len(train_config):
            raise UserError("ClusteredStrategy takes its training settings as arguments (lr=, batch_size=, ...), "
                            "not as train_config")
        flower_options(self.min_clients, timeout)
        self.summary()
        self._begin(grid, initial_arrays, num_rounds, timeout)
        assert self.alg is not None
        result = Result()
        for t in range(num_rounds):
            log.info("[ROUND %d/%d]", t + 1, num_rounds)
            live = self.link.refresh(t)
            cohort = np.asarray(self.stream[t], dtype=np.int64)
            with method_errors(self.method, self.alg.ctx.module):
                res = replayed_round(self.alg, t, cohort, {int(c) for c in cohort if int(c) not in live}, self.link)
            result.train_metrics_clientapp[t + 1] = MetricRecord({
                "num-clusters": self.alg.num_clusters, "bytes-up": res.bytes_up, "bytes-down": res.bytes_down,
                **{k: float(v) for k, v in res.extra.items()}})
            replies = exchange(grid, self.configure_evaluate(t + 1, ArrayRecord(), evaluate_config or ConfigRecord(),
                                                             grid), timeout)
            if (metrics := self.aggregate_evaluate(t + 1, replies)) is not None:
                log.info("\t└──> evaluation: %s", metrics)
                result.evaluate_metrics_clientapp[t + 1] = metrics
        result.arrays = ArrayRecord({f"{k}.{n}": v for k, sd in enumerate(self.cluster_state_dicts())
                                     for n, v in sd.items()})
        return result

    def _begin(self, grid: Grid, initial_arrays: ArrayRecord | None, num_rounds: int, timeout: float) -> None:
        """Wait for the nodes, greet them and build the method on their reports."""
        end = time.monotonic() + timeout
        while len(nodes := sorted(grid.get_node_ids())) < self.min_available_nodes:
            if time.monotonic() > end:
                raise UserError(f"only {len(nodes)} of min_available_nodes={self.min_available_nodes} nodes "
                                f"connected within {timeout:g} s")
            time.sleep(1.0)
        reports = client_order(greet(grid, nodes, timeout, -1))
        if len(reports) < self.min_available_nodes:
            raise UserError(f"{len(reports)} nodes answered fedcluster's hello, fewer than min_available_nodes="
                            f"{self.min_available_nodes}: register ClusteredClient on the ClientApp")
        self.cfg, typed = method_config(self.method, self.params, self.settings, len(reports), num_rounds)
        torch.manual_seed(self.cfg.seed)
        module = self.model_fn()
        if initial_arrays is not None and len(initial_arrays):
            names = {n for n, _ in module.named_parameters()}
            if not names <= set(initial_arrays):
                raise UserError(f"initial_arrays lacks the parameters {sorted(names - set(initial_arrays))[:5]} of "
                                "model_fn()'s model: give both the same model")
        check_same_model(reports, module)
        x_shape = reports[0].input_shape
        with torch.no_grad():
            num_classes = int(module(torch.zeros((1, *x_shape))).shape[-1])
        fed = label_federation(reports, num_classes, self.task)
        self.nodes = [r.node for r in reports]
        settings = RunSettings(self.cfg.seed, fed.num_clients, self.task)
        self.link = UserNodeLink(grid, settings.text(), flower_options(self.min_clients, timeout), reports)
        trainer = RemoteTrainer(module, fed.train.x_held, fed.train.y, fed.train.ptr, fed.task, self.cfg.seed,
                                self.link.send)
        cfg = self.cfg
        solver = Solver(lr=cfg.lr, epochs=cfg.local_epochs, batch_size=cfg.batch_size, momentum=cfg.momentum,
                        weight_decay=cfg.weight_decay, drop_last=cfg.drop_last)
        ctx = ModelContext(cfg, fed, module, trainer, solver)  # type: ignore[arg-type]
        ctx.model_fn = self.model_fn
        with method_errors(self.method, module):
            self.alg = ALGORITHMS.get(cfg.algorithm).obj(ctx, typed["algorithm"])
        if (why := self.alg.reads_every_input()) is not None:
            raise UserError(f"{self.method} with {why} reads every client's inputs on the server, which a Flower "
                            "app's server does not have; choose another setting or method")
        self.stream = participation_stream(fed.num_clients, cfg.cohort_size(), num_rounds, cfg.seed)
