"""The sharded backend: on each rank of a torchrun job, its own clients' work, and every rank's results gathered.

The clients' work of a round is cut by client: client ``c`` belongs to rank ``c % world``. :class:`ShardedTrainer`
trains the units of its own clients with the in-process backend (the same vectorised, dense, pool or sequential
path) and puts every rank's results back in unit order with one ``all_reduce`` (each entry has exactly one
non-zero contribution, so the sum is exact and every rank holds bitwise the same stack); the E-step's per-sample
losses are reduced the same way. A unit's batches are seeded by (seed, round, client, stream), never by its
position in the cohort, so a sharded round trains exactly the units of the single-process round.

Each rank holds the inputs of its own clients only (:mod:`fedcluster.data.sharded`). Server-side computations on
clients' data are per client (:meth:`ShardedTrainer.per_client`: evaluation, the weights of clients never
sampled, prototypes, signatures): each rank computes those of its clients and one ``all_reduce`` gathers them,
exactly as for training.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedcluster.data.sharded import ShardedSplit
from fedcluster.engine.distributed.group import all_reduce_sum, rank, world_size
from fedcluster.engine.params import Params
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer


def owned(clients: np.ndarray, rank_: int, world: int) -> np.ndarray:
    """Positions of ``clients`` whose client belongs to ``rank_`` (client c: rank c % world)."""
    return np.flatnonzero(np.asarray(clients, dtype=np.int64) % world == rank_)


class ShardedTrainer(LocalTrainer):
    """A :class:`LocalTrainer` that trains only this rank's clients and gathers every rank's results (module
    docstring); the algorithms call it as they call the in-process one. Its ``x``/``y``/``ptr`` are the held
    clients' rows (``split.local()``); ``split`` maps the algorithms' global rows to them."""

    split: ShardedSplit | None = None

    def sibling(self, module: torch.nn.Module, loss: Any) -> LocalTrainer:
        t = super().sibling(module, loss)
        t.split = self.split  # type: ignore[attr-defined]
        return t

    def per_client(self, split: Any, compute: Any, clients: np.ndarray | None = None) -> np.ndarray | torch.Tensor:
        if world_size() == 1 or not isinstance(split, ShardedSplit):
            return super().per_client(split, compute, clients)
        mine = np.asarray(compute(split.local()))
        held = (split.held if clients is None else split.held[clients]).reshape(-1, *[1] * (mine.ndim - 1))
        out = torch.from_numpy(np.where(held, mine, 0).astype(np.float64)).to(self.device)
        all_reduce_sum([out])  # each client's values come from its one rank: the sum is exact
        return out.cpu().numpy().astype(mine.dtype)

    def train(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
              weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
              init_index: np.ndarray | None = None) -> Params:
        return self._gathered(init, clients, solver, round_, weights, anchor, stream, init_index, False)[0]

    def train_steps(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
                    weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
                    init_index: np.ndarray | None = None) -> tuple[Params, np.ndarray]:
        out, steps = self._gathered(init, clients, solver, round_, weights, anchor, stream, init_index, True)
        assert steps is not None
        return out, steps

    def _gathered(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
                  weights: list[np.ndarray] | None, anchor: Params | None, stream: int,
                  init_index: np.ndarray | None, steps: bool) -> tuple[Params, np.ndarray | None]:
        """This rank's units trained, every rank's gathered (and, with ``steps``, their per-step losses)."""
        clients = np.asarray(clients, dtype=np.int64)
        first = next(iter(init.values()))
        if world_size() == 1 or first.device.type == "meta":
            if steps:
                return super().train_steps(init, clients, solver, round_, weights, anchor, stream, init_index)
            return super().train(init, clients, solver, round_, weights, anchor, stream, init_index), None
        mine = owned(clients, rank(), world_size())
        idx = torch.as_tensor(mine, device=first.device)
        full = {k: v.new_zeros((len(clients), *v.shape[1:])) for k, v in init.items()}
        part_steps = np.zeros((0, 0))
        if len(mine):
            if init_index is None:
                part_init, part_index = {k: v.index_select(0, idx) for k, v in init.items()}, None
            else:
                part_init, part_index = init, np.asarray(init_index)[mine]
            part_anchor = None if anchor is None else {k: v.index_select(0, idx.to(v.device))
                                                       for k, v in anchor.items()}
            part_weights = None if weights is None else [weights[u] for u in mine]
            args = (part_init, clients[mine], solver, round_, part_weights, part_anchor, stream, part_index)
            if steps:
                out, part_steps = super().train_steps(*args)
            else:
                out = super().train(*args)
            for k in full:
                full[k][idx] = out[k].to(full[k].dtype)
        all_reduce_sum(list(full.values()))
        self._watch(full, clients)  # every rank learns of every diverged client
        return full, (self._gathered_steps(mine, len(clients), part_steps) if steps else None)

    def _gathered_steps(self, mine: np.ndarray, units: int, part: np.ndarray) -> np.ndarray:
        """Every rank's per-step losses [U, S] (S the longest of any rank; NaN past a unit's last step)."""
        widths = torch.zeros(world_size(), dtype=torch.float64, device=self.device)
        widths[rank()] = part.shape[1]
        all_reduce_sum([widths])
        width = int(widths.max().item())
        values, known = np.zeros((units, width)), np.zeros((units, width))
        if len(mine):
            values[mine, :part.shape[1]] = np.nan_to_num(part)
            known[mine, :part.shape[1]] = ~np.isnan(part)
        both = [torch.from_numpy(values).to(self.device), torch.from_numpy(known).to(self.device)]
        all_reduce_sum(both)
        return np.where(both[1].cpu().numpy() > 0, both[0].cpu().numpy(), np.nan)

    def losses(self, models: Params, rows: np.ndarray, shared_body: bool = False) -> np.ndarray:
        if world_size() == 1:
            return super().losses(models, rows, shared_body)
        assert self.split is not None, "a sharded trainer needs its split"
        rows = np.asarray(rows, dtype=np.int64)
        owner = np.searchsorted(self.split.ptr, rows, side="right") - 1
        mine = owned(owner, rank(), world_size())
        k = len(next(iter(models.values())))
        full = np.zeros((len(rows), k))
        if len(mine):
            full[mine] = super().losses(models, self.split.local_rows(rows[mine]), shared_body)
        out = torch.from_numpy(full).to(self.device)
        all_reduce_sum([out])
        return out.cpu().numpy()
