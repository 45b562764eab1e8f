"""The remote backend: the clients' side of a round as per-client requests and replies of plain arrays.

The boundary: a client computes (1) local training of its units, i.e. model copies it trains on its own
data with optional per-sample weights, a proximal anchor, a solver, a round and a stream
(:meth:`LocalTrainer.train`), and (2) the E-step's per-sample losses of K models on its training data
(:meth:`LocalTrainer.losses`). Everything else (aggregation, Ω and γ, C_{y,k}, split/merge/remove, distances)
is the server's. In process one trainer serves a whole cohort in one call. :class:`RemoteTrainer` cuts
the same call into one :class:`Request` per client, a transport (``fedcluster.flower``) carries it to the
client's node, the node answers with :func:`serve` (the same ``LocalTrainer`` call on its own partition), and
the replies are put back in unit order. A request is named numpy arrays plus a flat config of
int/float/str/bool: nothing on the wire needs pickle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.kernels import LossFn
from fedcluster.engine.training.multihead import MultiHead, MultiHeadLoss

TRAIN, LOSSES = "train", "losses"
STEP_LOSSES = "steps/losses"  # the reply array of per-step losses (a train request with config step_losses=1)
Arrays = dict[str, np.ndarray]


@dataclass
class Request:
    """One client's work: ``kind`` (TRAIN or LOSSES), its partition id, arrays and scalar settings."""

    kind: str
    client: int
    arrays: Arrays
    config: dict[str, Any] = field(default_factory=dict)


class ClientsFailed(RuntimeError):
    """Raised by a transport when some clients' replies did not come back (crash, timeout, error)."""

    def __init__(self, clients: set[int]) -> None:
        super().__init__(f"no reply from clients {sorted(clients)}")
        self.clients = clients


Send = Callable[[list[Request]], list[Arrays]]  # replies in request order, or raise ClientsFailed


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy()


# -- server side: cut a cohort call into requests and stitch the replies --------------------------------
def train_requests(init: Params, clients: np.ndarray, solver: Solver, round_: int, weights: list[np.ndarray] | None,
                   anchor: Params | None, stream: int, heads: int, steps: bool = False
                   ) -> list[tuple[np.ndarray, Request]]:
    """(unit positions, request) per distinct client, in order of first appearance (``steps``: the reply also
    carries the units' per-step losses)."""
    clients = np.asarray(clients, dtype=np.int64)
    _, first = np.unique(clients, return_index=True)
    out = []
    for c in clients[np.sort(first)]:
        units = np.flatnonzero(clients == c)
        idx = torch.as_tensor(units)
        arrays = {f"init/{n}": _np(v.index_select(0, idx.to(v.device))) for n, v in init.items()}
        if anchor is not None:
            arrays.update({f"anchor/{n}": _np(v.index_select(0, idx.to(v.device))) for n, v in anchor.items()})
        if weights is not None:
            arrays.update({f"weight/{j}": np.asarray(weights[u], dtype=np.float32) for j, u in enumerate(units)})
        config = {**{k: (-1 if v is None else v) for k, v in dataclasses.asdict(solver).items()},
                  "round": int(round_), "stream": int(stream), "heads": int(heads), "units": len(units)}
        if steps:
            config["step_losses"] = 1
        out.append((units, Request(TRAIN, int(c), arrays, config)))
    return out


def loss_requests(models: Params, rows: np.ndarray, ptr: np.ndarray, shared_body: bool
                  ) -> list[tuple[slice, Request]]:
    """(positions in ``rows``, request) per client; ``rows`` must be whole clients back to back."""
    arrays = {f"model/{n}": _np(v) for n, v in models.items()}
    out, i = [], 0
    while i < len(rows):
        c = int(np.searchsorted(ptr, rows[i], side="right") - 1)
        n = int(ptr[c + 1] - ptr[c])
        if not np.array_equal(rows[i:i + n], np.arange(ptr[c], ptr[c + 1])):
            raise ValueError("remote E-step losses need every training row of a client, in order")
        out.append((slice(i, i + n), Request(LOSSES, c, arrays, {"shared_body": bool(shared_body)})))
        i += n
    return out


class RemoteTrainer(LocalTrainer):
    """A :class:`LocalTrainer` whose work is done by the clients' nodes through ``send``; the algorithms call it
    exactly as they call the in-process one."""

    def __init__(self, module: nn.Module, x: torch.Tensor, y: torch.Tensor, ptr: np.ndarray, task: str, seed: int,
                 send: Send, heads: int = 0) -> None:
        super().__init__(module, x, y, ptr, task, seed, path="sequential")
        self.send, self.heads = send, heads

    def sibling(self, module: nn.Module, loss: LossFn) -> LocalTrainer:
        if not isinstance(module, MultiHead):
            raise NotImplementedError("remote training knows the plain model and engine.training.multihead's MultiHead")
        return RemoteTrainer(self.module, self.x, self.y, self.ptr, self.task, self.seed, self.send,
                             heads=len(module.heads))

    def train(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
              weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
              init_index: np.ndarray | None = None) -> Params:
        return self._remote(init, clients, solver, round_, weights, anchor, stream, init_index, False)[0]

    def train_steps(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
                    weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
                    init_index: np.ndarray | None = None) -> tuple[Params, np.ndarray]:
        out, steps = self._remote(init, clients, solver, round_, weights, anchor, stream, init_index, True)
        assert steps is not None
        return out, steps

    def _remote(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
                weights: list[np.ndarray] | None, anchor: Params | None, stream: int,
                init_index: np.ndarray | None, steps: bool) -> tuple[Params, np.ndarray | None]:
        if init_index is not None:  # each client's request carries its own starting points
            idx = torch.as_tensor(np.asarray(init_index, dtype=np.int64))
            init = {n: v.index_select(0, idx.to(v.device)) for n, v in init.items()}
        parts = train_requests(init, clients, solver, round_, weights, anchor, stream, self.heads, steps)
        replies = self.send([r for _, r in parts])
        out = {n: torch.empty_like(v) for n, v in init.items()}
        for (units, _), reply in zip(parts, replies, strict=True):
            idx = torch.as_tensor(units)
            for n in out:
                out[n][idx] = torch.from_numpy(reply[n]).to(out[n].device, out[n].dtype)
        self._watch(out, np.asarray(clients, dtype=np.int64))  # the divergence watch sees every node's units
        if not steps:
            return out, None
        width = max(reply[STEP_LOSSES].shape[1] for reply in replies)
        losses = np.full((len(clients), width), np.nan)
        for (units, _), reply in zip(parts, replies, strict=True):
            losses[units, :reply[STEP_LOSSES].shape[1]] = reply[STEP_LOSSES]
        return out, losses

    def losses(self, models: Params, rows: np.ndarray, shared_body: bool = False) -> np.ndarray:
        parts = loss_requests(models, np.asarray(rows), self.ptr, shared_body)
        replies = self.send([r for _, r in parts])
        out = np.zeros((len(rows), len(next(iter(models.values())))))
        for (pos, _), reply in zip(parts, replies, strict=True):
            out[pos] = reply["losses"]
        return out


# -- client side ----------------------------------------------------------------------------------------
def node_trainer(module: nn.Module, x: torch.Tensor, y: torch.Tensor, client: int, num_clients: int, task: str,
                 seed: int, path: str, channels_last: bool = False) -> LocalTrainer:
    """A trainer that holds one client's data only (rows ``x``/``y``) under its federation-wide id, so its
    batch schedule (seeded by seed, round, client, stream) is the in-process engine's."""
    ptr = np.zeros(num_clients + 1, dtype=np.int64)
    ptr[client + 1:] = len(x)
    return LocalTrainer(module, x, y, ptr, task, seed=seed, path=path, workers=1, channels_last=channels_last)


def _params(arrays: Arrays, prefix: str, device: torch.device) -> Params:
    return {k[len(prefix):]: torch.from_numpy(np.array(v)).to(device) for k, v in arrays.items()
            if k.startswith(prefix)}


def serve(trainer: LocalTrainer, request: Request, siblings: dict[int, LocalTrainer] | None = None) -> Arrays:
    """Answer one request on this node's ``trainer`` (``siblings`` caches the multi-head trainers)."""
    c, cfg, device = request.client, request.config, trainer.x.device
    if request.kind == LOSSES:
        rows = np.arange(trainer.ptr[c], trainer.ptr[c + 1])
        return {"losses": trainer.losses(_params(request.arrays, "model/", device), rows, bool(cfg["shared_body"]))}
    if request.kind != TRAIN:
        raise ValueError(f"unknown request kind {request.kind!r}")
    heads = int(cfg["heads"])
    local = trainer
    if heads:
        siblings = {} if siblings is None else siblings
        if heads not in siblings:
            siblings[heads] = trainer.sibling(MultiHead(trainer.module, heads), MultiHeadLoss(trainer.task))
        local = siblings[heads]
    names = {f.name for f in dataclasses.fields(Solver)}
    solver = Solver(**{k: (None if k == "max_steps" and v == -1 else v) for k, v in cfg.items() if k in names})
    units = int(cfg["units"])
    weights = [request.arrays[f"weight/{j}"] for j in range(units)] if "weight/0" in request.arrays else None
    anchor = _params(request.arrays, "anchor/", device) or None
    args = (_params(request.arrays, "init/", device), np.full(units, c), solver, int(cfg["round"]))
    if cfg.get("step_losses"):
        out, steps = local.train_steps(*args, weights=weights, anchor=anchor, stream=int(cfg["stream"]))
        return {**{n: _np(v) for n, v in out.items()}, STEP_LOSSES: steps}
    out = local.train(*args, weights=weights, anchor=anchor, stream=int(cfg["stream"]))
    return {n: _np(v) for n, v in out.items()}
