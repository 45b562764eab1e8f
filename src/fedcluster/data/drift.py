"""Concept drift over rounds: a federation whose clients change concept (label map) at given rounds.

The drift scenarios (:mod:`fedcluster.data.scenarios.drift`) build the federation with the concepts of the first
round and record the schedule in ``Federation.extras``:

* ``label_maps`` [concepts, classes] – the label map of every concept (permutations of 0..C−1);
* ``drift_train`` [H, M] – the concept of every participating client in rounds 1..H (row t: round t + 1);
* ``drift_test`` [H, T] – the same for the test clients (they drift too).

After round H every client keeps its concept of round H. :meth:`Drift.apply` moves the federation to the concepts
of a round in place: a client whose concept changes from a to b has every label of its training, validation (and,
for a test client, test) rows mapped by ``maps[b] ∘ maps[a]⁻¹``, and ``true_cluster`` / ``test_cluster`` become
the round's concepts, so the round's ARI and accuracies are measured against the concepts of that round. Only the
clients that change are touched, on the device their labels are on; a federation without a schedule has no
:class:`Drift` and is never touched.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from fedcluster.data.federation import Federation, Split

KEYS = ("label_maps", "drift_train", "drift_test")


@dataclass
class Drift:
    """The schedule of a drifting federation (module docstring)."""

    maps: np.ndarray  # [concepts, classes]
    train: np.ndarray  # [H, M] concept of each participating client in rounds 1..H
    test: np.ndarray  # [H, T] concept of each test client in rounds 1..H

    @staticmethod
    def of(fed: Federation) -> Drift | None:
        """The federation's schedule, or None for a static federation."""
        if "drift_train" not in fed.extras:
            return None
        maps, train, test = (np.asarray(fed.extras[k], dtype=np.int64) for k in KEYS)
        if train.ndim != 2 or train.shape[1] != fed.num_clients or test.shape != (len(train), fed.test.num_clients):
            raise ValueError("the drift schedule does not match the federation's clients")
        if train.min(initial=0) < 0 or max(train.max(initial=0), test.max(initial=0)) >= len(maps):
            raise ValueError("the drift schedule names concepts without a label map")
        return Drift(maps, train, test)

    @property
    def horizon(self) -> int:
        """H: the last round whose concepts the schedule gives (the concepts stay after it)."""
        return len(self.train)

    def concepts(self, round_: int) -> tuple[np.ndarray, np.ndarray]:
        """(participating, test) clients' concepts in round ``round_`` (counted from 1)."""
        row = min(max(round_, 1), self.horizon) - 1
        return self.train[row], self.test[row]

    def switch_rounds(self) -> np.ndarray:
        """[M] the first round in which each participating client holds another concept than in round 1 (0: never)."""
        moved = self.train != self.train[0]
        return np.where(moved.any(0), moved.argmax(0) + 1, 0)

    @staticmethod
    def own_labels(fed: Federation) -> Federation:
        """``fed`` with copies of its labels and ground truth (the inputs shared), for a run to relabel in place."""
        def own(s: Split) -> Split:
            return Split(s.x, s.y.clone(), s.ptr, s.fit)

        return dataclasses.replace(fed, train=own(fed.train), val=own(fed.val), test=own(fed.test),
                                   true_cluster=fed.true_cluster.copy(), test_cluster=fed.test_cluster.copy())

    def apply(self, fed: Federation, round_: int) -> np.ndarray:
        """Relabel ``fed`` in place to the concepts of ``round_`` (from 1); returns the participating clients whose
        concept changed (test clients are relabelled too)."""
        train, test = self.concepts(round_)
        changed = np.flatnonzero(fed.true_cluster != train)
        for split in (fed.train, fed.val):
            self._relabel(split, changed, fed.true_cluster, train)
        tested = np.flatnonzero(fed.test_cluster != test)
        self._relabel(fed.test, tested, fed.test_cluster, test)
        fed.true_cluster = train.copy()
        fed.test_cluster = test.copy()
        return changed

    def _relabel(self, split: Split, clients: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
        """Map the labels of ``clients``' rows from concept ``old[i]`` to ``new[i]`` (``maps[new] ∘ maps[old]⁻¹``)."""
        if not len(clients):
            return
        inverse = np.argsort(self.maps, axis=1)  # inverse[c][maps[c][y]] = y
        y = split.y
        for i in clients:
            lo, hi = int(split.ptr[i]), int(split.ptr[i + 1])
            if hi > lo:
                perm = torch.as_tensor(self.maps[new[i]][inverse[old[i]]], device=y.device)
                y[lo:hi] = perm[y[lo:hi]]


def describe_drift(drift: Drift) -> list[str]:
    """Summary lines: which clients switch concept in which round."""
    lines = [f"  drift over rounds 1..{drift.horizon} (concepts kept after round {drift.horizon}):"]
    for t in range(1, drift.horizon):
        before, now = drift.train[t - 1], drift.train[t]
        moved = np.flatnonzero(before != now)
        for a, b in sorted({(int(before[i]), int(now[i])) for i in moved}):
            who = moved[(before[moved] == a) & (now[moved] == b)]
            lines.append(f"    round {t + 1}: clients {who.tolist()} switch from concept {a} to {b}")
        tmoved = np.flatnonzero(drift.test[t - 1] != drift.test[t])
        if len(tmoved):
            lines.append(f"    round {t + 1}: test clients {tmoved.tolist()} switch to concepts "
                         f"{drift.test[t][tmoved].tolist()}")
    return lines
