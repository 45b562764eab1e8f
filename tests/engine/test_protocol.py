"""engine.protocol: the clients' work cut into per-client requests, served by per-node trainers that hold one
client's data each, gives the in-process engine's models and assignments (no Flower involved)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.config.run_config import RunConfig, load_raw, resolve
from fedcluster.data.federation import Federation
from fedcluster.engine.placement import Placement
from fedcluster.engine.runner import Run
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.trainers.remote import ClientsFailed, RemoteTrainer, Request, node_trainer, serve
from tests.algorithms.test_clustered import _one_thread  # noqa: F401  (autouse: one intra-op thread for tiny models)


class Loopback(Placement):
    """Clients on a RemoteTrainer whose requests go to one in-memory trainer per client."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def trainer(self, module: torch.nn.Module, fed: Federation, cfg: RunConfig, path: str,
                device: torch.device) -> LocalTrainer:
        nodes = {c: node_trainer(module, *fed.train.client(c), c, fed.num_clients, fed.task, cfg.seed, cfg.engine)
                 for c in range(fed.num_clients)}
        siblings: dict[int, dict[int, LocalTrainer]] = {c: {} for c in nodes}

        def send(requests: list[Request]) -> list[dict[str, np.ndarray]]:
            self.requests += requests
            return [serve(nodes[r.client], r, siblings[r.client]) for r in requests]

        return RemoteTrainer(module, fed.train.x, fed.train.y, fed.train.ptr, fed.task, cfg.seed, send)


def _config(tmp: Path, name: str, extra: list[str]):
    return resolve(load_raw(None, ["dataset=digits", "scenario=concept-swap", "num_clients=6", "rounds=3",
                                   "model=mlp", "model.hidden=[16]", "progress=false", "engine=dense", "device=cpu",
                                   f"out={tmp / name}", *extra]))


@pytest.mark.parametrize("extra", [
    ["algorithm=fedavg"], ["algorithm=fedprox", "clients_per_round=4"], ["algorithm=ifca"],
    ["algorithm=fedrc"], ["algorithm=fedrc", "algorithm.split=true"], ["algorithm=cfl"],
], ids=lambda e: " ".join(e))
def test_per_client_requests_equal_in_process(extra: list[str], tmp_path: Path) -> None:
    cfg, typed = _config(tmp_path, "a", extra)
    ref = Run(cfg, typed)
    ref.execute()
    cfg2, typed2 = _config(tmp_path, "b", extra)
    loopback = Loopback()
    rem = Run(cfg2, typed2, placement=loopback)
    rem.execute()
    assert loopback.requests, "the remote trainer must have been used"
    np.testing.assert_array_equal(rem.alg.assignment(), ref.alg.assignment())
    np.testing.assert_allclose(rem.alg.omega, ref.alg.omega, atol=1e-6)
    for name, v in ref.alg.models.items():
        torch.testing.assert_close(rem.alg.models[name], v, atol=1e-5, rtol=1e-5)


def test_requests_carry_plain_arrays_and_scalars(tmp_path: Path) -> None:
    cfg, typed = _config(tmp_path, "a", ["algorithm=fedrc", "rounds=1"])
    loopback = Loopback()
    Run(cfg, typed, placement=loopback).execute()
    kinds = {r.kind for r in loopback.requests}
    assert kinds == {"train", "losses"}
    for r in loopback.requests:
        assert all(isinstance(a, np.ndarray) for a in r.arrays.values())
        assert all(isinstance(v, int | float | str | bool) for v in r.config.values())
    clients = [r.client for r in loopback.requests if r.kind == "train"]
    assert sorted(clients) == list(range(6))  # one request per client, with its K units


def test_loss_requests_refuse_partial_clients(tmp_path: Path) -> None:
    cfg, typed = _config(tmp_path, "a", ["algorithm=ifca"])
    run = Run(cfg, typed, placement=Loopback())
    ptr = run.fed.train.ptr
    with pytest.raises(ValueError, match="every training row"):
        run.ctx.trainer.losses(run.alg.models, np.arange(ptr[0], ptr[1] - 1))


def test_the_placement_keyword_keeps_its_earlier_name(tmp_path: Path) -> None:
    cfg, typed = _config(tmp_path, "b", ["algorithm=ifca"])
    loopback = Loopback()
    assert Run(cfg, typed, backend=loopback).placement is loopback


def test_a_failing_transport_raises_clients_failed() -> None:
    def send(requests: list[Request]) -> list[dict[str, np.ndarray]]:
        raise ClientsFailed({requests[0].client})

    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    x, y = torch.zeros(6, 4), torch.zeros(6, dtype=torch.long)
    tr = RemoteTrainer(module, x, y, np.array([0, 3, 6]), "classification", 0, send)
    with pytest.raises(ClientsFailed) as e:
        tr.losses({n: p.detach().unsqueeze(0) for n, p in module.named_parameters()}, np.arange(6))
    assert e.value.clients == {0}


def test_the_divergence_watch_sees_units_trained_on_nodes(tmp_path: Path) -> None:
    """A node whose local training blew up (its reply holds NaN) is reported by the watch, as in process."""
    cfg, typed = _config(tmp_path, "nan", ["algorithm=fedavg"])
    run = Run(cfg, typed, placement=Loopback())
    tr = run.ctx.trainer
    inner = tr.send

    def send(requests: list[Request]) -> list[dict[str, np.ndarray]]:
        replies = inner(requests)
        for r, reply in zip(requests, replies, strict=True):
            if r.client == 2:
                for v in reply.values():
                    v[...] = np.nan
        return replies

    tr.send = send
    tr.train(run.alg.models, np.array([1, 2, 3]), run.ctx.solver, 0, init_index=np.zeros(3, dtype=np.int64))
    assert tr.take_nonfinite() == [2]
