"""Client participation: one seeded stream per run, so resumed runs sample the same cohorts.

The cohorts are drawn lazily, round by round, from one generator seeded by ``[seed, 1]``: round t's
cohort is the t-th ``rng.choice(num_clients, cohort, replace=False)`` of that generator, sorted. Nothing
is drawn ahead, so ``rounds=10**9`` costs no memory; the sequence is the one the eager
``[rounds, cohort]`` array of earlier versions held, so existing runs repeat exactly.
"""

from __future__ import annotations

import numpy as np


class ParticipationStream:
    """``stream[t]``: the sorted client ids of round ``t`` (0-based); full participation when ``cohort == num_clients``.

    Reading rounds in increasing order (the run loop, a resume) costs one draw per round; reading an
    earlier round again replays the generator from the start.
    """

    def __init__(self, num_clients: int, cohort: int, rounds: int, seed: int) -> None:
        if not 1 <= cohort <= num_clients:
            raise ValueError(f"cohort size must be in 1..{num_clients}, got {cohort}")
        self.num_clients, self.cohort, self.rounds, self.seed = num_clients, cohort, rounds, seed
        self._restart()

    def _restart(self) -> None:
        self._rng = np.random.default_rng([self.seed, 1])
        self._next = 0  # the round the generator draws next
        self._last: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return self.rounds

    def __getitem__(self, t: int) -> np.ndarray:
        t = int(t)
        if not 0 <= t < self.rounds:
            raise IndexError(f"round {t} outside 0..{self.rounds - 1}")
        if self.cohort == self.num_clients:
            return np.arange(self.num_clients)
        if self._last is not None and self._last[0] == t:
            return self._last[1].copy()
        if t < self._next:
            self._restart()
        while self._next <= t:
            ids = np.sort(self._rng.choice(self.num_clients, self.cohort, replace=False))
            self._next += 1
        self._last = (t, ids)
        return ids.copy()

    def ever_sampled(self, rounds: int) -> np.ndarray:
        """[num_clients] bool: sampled in at least one of rounds 0..rounds-1 (the same draws as ``self[t]``)."""
        seen = np.zeros(self.num_clients, dtype=bool)
        if self.cohort == self.num_clients:
            seen[:] = rounds > 0
            return seen
        rng = np.random.default_rng([self.seed, 1])
        for _ in range(min(rounds, self.rounds)):
            seen[rng.choice(self.num_clients, self.cohort, replace=False)] = True
            if seen.all():
                break
        return seen


def participation_stream(num_clients: int, cohort: int, rounds: int, seed: int) -> ParticipationStream:
    """The lazy participation stream of a run (see :class:`ParticipationStream`)."""
    return ParticipationStream(num_clients, cohort, rounds, seed)
