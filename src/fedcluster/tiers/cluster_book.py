"""The cluster book: stable cluster ids, the log of every change of K, and how a change applies to the models,
the weights and the server statistics (HCFL paper Alg. 4, 5; FedRC paper App. H.4 Alg. 3; StoCFL's merge). The
tier-3 rules that decide a change live in :mod:`fedcluster.tiers.adaptation`.

* :class:`ClusterBook` — stable cluster ids. Position k (a column of Ω, a row of the model stack) holds the
  cluster with id ``ids[k]``; a split appends the new cluster at position K^t (HCFL paper Alg. 4: index K^t + 1),
  a merge or removal deletes positions and keeps the order of the rest. Every change is logged as a
  :class:`ClusterEvent` with its round.
* Weight updates on a matrix whose rows are on the simplex (client weights Ω [M, K], ω̃, or sample weights
  ω_{i,j;k} [N, K]; any leading shape): :func:`split_weights` (HCFL paper Alg. 4 lines 6–9, soft-clustering weight
  update), :func:`remove_weights` (Alg. 5 lines 5–7; FedRC paper Alg. 3 step 2), :func:`soft_split` /
  :func:`soft_remove` (ω̃ and ω_{i,j;k} together), :func:`hard_split_weights` (the "w/o SCWU" reading of
  HCFL paper Table 7), :func:`merge_weights` (StoCFL); the server-side statistics of Alg. 4/5 (soft label counts F)
  with :func:`split_statistics` / :func:`remove_statistics`; model stacks with :func:`append_model` /
  :func:`keep_models`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from fedcluster.models.param_dict import Params

EventKind = Literal["split", "merge", "remove"]


# -- stable ids and the event log ----------------------------------------------------------------
@dataclass(frozen=True)
class ClusterEvent:
    """One change of the cluster set. ``cluster`` is the id split / kept by a merge / removed; ``others`` are
    the new id (split) or the absorbed ids (merge); ``clients`` the clients that moved, when known."""

    round: int
    kind: EventKind
    cluster: int
    others: tuple[int, ...] = ()
    clients: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["others"], d["clients"] = list(self.others), list(self.clients)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ClusterEvent:
        return ClusterEvent(int(d["round"]), d["kind"], int(d["cluster"]), tuple(d.get("others", ())),
                            tuple(d.get("clients", ())))


@dataclass
class ClusterBook:
    """Stable ids of the K^t current clusters (by position) and the log of every split, merge and removal.

    Rounds in events are the 1-based ``round`` of ``rounds.csv`` (the round at whose end the change happened).
    """

    ids: list[int] = field(default_factory=lambda: [0])
    next_id: int = 1
    events: list[ClusterEvent] = field(default_factory=list)

    @staticmethod
    def start(k: int) -> ClusterBook:
        return ClusterBook(list(range(k)), k, [])

    @property
    def k(self) -> int:
        return len(self.ids)

    def position(self, cluster_id: int) -> int:
        return self.ids.index(cluster_id)

    def split(self, round_: int, position: int, clients: Sequence[int] | np.ndarray = ()) -> int:
        """Add a cluster split off position ``position``; it takes position K^t (returned)."""
        new = self.next_id
        self.next_id += 1
        self.ids.append(new)
        self.events.append(ClusterEvent(round_, "split", self.ids[position], (new,),
                                        tuple(int(c) for c in clients)))
        return len(self.ids) - 1

    def merge(self, round_: int, groups: Sequence[tuple[int, Sequence[int]]]) -> np.ndarray:
        """Fold, for every (keep, absorbed) of ``groups``, positions ``absorbed`` into ``keep`` (all positions in
        the current order); returns the kept positions in order (index models / Ω columns with it after
        combining them)."""
        drop: list[int] = []
        for keep, absorbed in groups:
            absorbed = sorted(set(int(a) for a in absorbed) - {int(keep)})
            self.events.append(ClusterEvent(round_, "merge", self.ids[keep], tuple(self.ids[a] for a in absorbed)))
            drop += absorbed
        return self._drop(drop)

    def remove(self, round_: int, positions: Sequence[int]) -> np.ndarray:
        """Delete ``positions`` (HCFL paper Alg. 5 / FedRC paper Alg. 3); returns the kept positions in order."""
        positions = sorted(set(int(p) for p in positions))
        for p in positions:
            self.events.append(ClusterEvent(round_, "remove", self.ids[p]))
        return self._drop(positions)

    def _drop(self, positions: Sequence[int]) -> np.ndarray:
        keep = np.setdiff1d(np.arange(self.k), np.asarray(positions, dtype=np.int64))
        self.ids = [self.ids[p] for p in keep]
        return keep

    def events_in(self, round_: int) -> list[ClusterEvent]:
        return [e for e in self.events if e.round == round_]

    def count(self, round_: int, kind: EventKind) -> int:
        return sum(e.kind == kind for e in self.events_in(round_))

    def state_dict(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "next_id": self.next_id, "events": [e.to_dict() for e in self.events]}

    @staticmethod
    def from_state(state: dict[str, Any]) -> ClusterBook:
        return ClusterBook([int(i) for i in state["ids"]], int(state["next_id"]),
                           [ClusterEvent.from_dict(e) for e in state["events"]])


# -- model stacks ----------------------------------------------------------------------------------
def append_model(models: Params, new: Params) -> Params:
    """The stack with one more unit ``new`` (unstacked parameters) at the end."""
    return {n: torch.cat([v, new[n].unsqueeze(0).to(v.dtype)]) for n, v in models.items()}


def keep_models(models: Params, keep: np.ndarray) -> Params:
    """The stack restricted to positions ``keep`` (in that order)."""
    return {n: v.index_select(0, torch.as_tensor(np.asarray(keep, dtype=np.int64), device=v.device))
            for n, v in models.items()}


# -- cluster changes: the K models, their stable ids and the clients' positions together -------------------
def split_off(models: Params, book: ClusterBook, round_: int, position: int, new: Params,
              movers: Sequence[int] | np.ndarray = ()) -> tuple[Params, int]:
    """A cluster split off ``position`` with model ``new`` (unstacked), logged with the clients that move to it;
    it takes position K^t. Returns (the models, the new position)."""
    return append_model(models, new), book.split(round_, position, movers)


def remove_clusters(models: Params, book: ClusterBook, round_: int, positions: Sequence[int] | np.ndarray
                    ) -> tuple[Params, np.ndarray]:
    """Clusters ``positions`` deleted (HCFL paper Alg. 5 / FedRC paper Alg. 3). Returns (the models, the kept
    positions in order)."""
    keep = book.remove(round_, list(positions))
    return keep_models(models, keep), keep


def merge_clusters(models: Params, book: ClusterBook, round_: int, groups: Sequence[tuple[int, Sequence[int]]]
                   ) -> tuple[Params, np.ndarray, np.ndarray]:
    """For every (keep, absorbed) of ``groups``, positions ``absorbed`` folded into ``keep``; ``models`` is the
    stack before the drop (with the merged clusters' models at their kept positions). Returns (the models, the
    kept positions, remap: old position -> the position it folds into, before the drop)."""
    remap = np.arange(book.k)
    for keep, absorbed in groups:
        remap[np.asarray(absorbed, dtype=np.int64)] = keep
    kept = book.merge(round_, groups)
    return keep_models(models, kept), kept, remap


def reposition(client_positions: np.ndarray, keep: np.ndarray, k_before: int, remap: np.ndarray | None = None
               ) -> np.ndarray:
    """The clients' cluster positions after only ``keep`` (of ``k_before``) survive, each first folded by
    ``remap``; -1 (no cluster) stays -1, and so does a client of a deleted cluster."""
    new_pos = np.full(k_before, -1, dtype=np.int64)
    new_pos[keep] = np.arange(len(keep))
    at = np.maximum(client_positions, 0)
    return np.where(client_positions >= 0, new_pos[at if remap is None else remap[at]], -1)


# -- weight updates (rows stay on the simplex) --------------------------------------------------------
def split_weights(weights: np.ndarray, position: int) -> np.ndarray:
    """HCFL paper Alg. 4 lines 6–9 (soft-clustering weight update, SCWU): a new last column ω_{·;K^t+1} = ω_{·;k*}/2
    and ω_{·;k*} ← ω_{·;k*}/2, for every row (all clients i and samples j, HCFL paper Sec. 4.3). Row sums are kept."""
    w = np.asarray(weights, dtype=np.float64)
    half = w[..., position] / 2
    out = np.concatenate([w, half[..., None]], axis=-1)
    out[..., position] = half
    return out


def soft_split(omega: np.ndarray, position: int, sample: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray | None]:
    """HCFL paper Alg. 4 client side on client-wise ω̃ [M, K] and, if given, sample-wise ω_{i,j;k} [N, K] at once."""
    return split_weights(omega, position), None if sample is None else split_weights(sample, position)


def soft_remove(omega: np.ndarray, positions: Sequence[int] | int, sample: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """HCFL paper Alg. 5 client side on ω̃ [M, K] and, if given, ω_{i,j;k} [N, K] at once."""
    return remove_weights(omega, positions), None if sample is None else remove_weights(sample, positions)


def hard_split_weights(weights: np.ndarray, position: int, second: np.ndarray, first: np.ndarray | None = None
                       ) -> np.ndarray:
    """"w/o SCWU" (HCFL paper Table 7, a commented-out block of the reference code): after the split
    of k*, rows in ``second`` (bool mask over rows, C_{k*,2}) become one-hot on the new cluster and rows in
    ``first`` (C_{k*,1}; default: the other rows whose largest weight is k*) one-hot on k*; the remaining rows
    keep their weights (0 on the new cluster)."""
    w = np.asarray(weights, dtype=np.float64)
    out = np.concatenate([w, np.zeros(w.shape[:-1] + (1,))], axis=-1)
    second = np.asarray(second, dtype=bool)
    first = ((w.argmax(-1) == position) & ~second) if first is None else np.asarray(first, dtype=bool) & ~second
    out[first] = 0.0
    out[first, position] = 1.0
    out[second] = 0.0
    out[second, -1] = 1.0
    return out


def remove_weights(weights: np.ndarray, positions: Sequence[int] | np.ndarray | int) -> np.ndarray:
    """HCFL paper Alg. 5 lines 5–7 (and FedRC paper Alg. 3 step 2): drop the columns ``positions`` and renormalise
    each row,
    ω_{·;k} ← ω_{·;k} / Σ_{n∉R} ω_{·;n}. Removing several at once equals removing them one after the other
    (each step only rescales the survivors). [added] A row with no mass left on the survivors becomes
    uniform over them."""
    w = np.asarray(weights, dtype=np.float64)
    drop = np.atleast_1d(np.asarray(positions, dtype=np.int64))
    keep = np.setdiff1d(np.arange(w.shape[-1]), drop)
    out = w[..., keep]
    total = out.sum(-1, keepdims=True)
    uniform = np.full_like(out, 1.0 / max(len(keep), 1))
    return np.where(total > 0, out / np.where(total > 0, total, 1.0), uniform)


def merge_weights(weights: np.ndarray, keep: int, absorbed: Sequence[int]) -> np.ndarray:
    """StoCFL's merge on Ω: the absorbed columns' mass moves to ``keep`` and the columns are deleted (rows stay
    on the simplex; one-hot rows stay one-hot)."""
    w = np.asarray(weights, dtype=np.float64).copy()
    absorbed = sorted(set(int(a) for a in absorbed) - {keep})
    w[..., keep] += w[..., absorbed].sum(-1)
    return np.delete(w, absorbed, axis=-1)


def split_statistics(table: np.ndarray, position: int, axis: int = 0) -> np.ndarray:
    """HCFL paper Alg. 4 lines 3–4 (server side): the new cluster starts with a copy of k*'s statistics, e.g. the soft
    label
    counts F_{g,K^t+1} ← F_{g,k*} ([K, C], ``axis=0``) and F^{latest}_{i,K^t+1} ← F^{latest}_{i,k*} ([M, K, C],
    ``axis=1``); the copy is appended along ``axis``."""
    t = np.asarray(table)
    return np.concatenate([t, np.take(t, [position], axis=axis)], axis=axis)


def remove_statistics(table: np.ndarray, positions: Sequence[int] | np.ndarray | int, axis: int = 0) -> np.ndarray:
    """HCFL paper Alg. 5 lines 2–3 (server side): drop the removed clusters' statistics (F_{g,k_r},
    F^{latest}_{i,k_r})."""
    return np.delete(np.asarray(table), np.atleast_1d(np.asarray(positions, dtype=np.int64)), axis=axis)
