"""Stop a run whose training diverged (the runner raises :class:`DivergedError`, exit status 3).

A run has diverged at round t when, checked after the round and after its evaluation (a callback of the round
loop, outside the methods), one of these holds:

1. **Non-finite numbers**: a client's locally trained unit (the trainer records each unit's largest absolute
   entry), a cluster model, Ω, or the evaluated val/test loss is NaN or infinite.
2. **Exploded weights**: the Euclidean norm of some cluster model exceeds ``GROWTH`` (10³) times the reference
   norm, the largest cluster-model norm when the watch started (the initial models, or those of the resumed
   checkpoint), floored at 1 so that models initialised near zero may grow to a norm of 10³.
3. **Blown up and stuck** (classification): on ``STUCK_EVALUATIONS`` (3) consecutive evaluations the largest
   model norm is above ``STUCK_GROWTH`` (10) times the reference and the evaluation loss (the smaller of
   val_loss and test_loss) is at least ln C, the loss of guessing uniformly among the C classes: the weights
   grew by an order of magnitude and the models are no better than chance (e.g. every ReLU dead after a too
   large step, each sample given one class).

Normal training stays far from both thresholds: on the default setting (digits, concept-swap, MLP), 40 rounds of
FedAvg and IFCA with lr 0.1–1 and 20 of FedRC and CFL grow the largest norm 1.0–1.63-fold (logistic regression at
lr 1, whose norm keeps growing on separable data: 3.8-fold in 30 rounds), and the loss falls below ln C in the
first rounds; the diverging runs of the tests (MLP at lr 10 and above, logistic at 1e30, light CNN at 100, IFCA and
FedRC at 1e6) grow it 15-fold to beyond float32 within one or two rounds.

Cost: at most one host read per round. The trainer's per-unit peaks and each cluster model's peak and norm are
reduced on the device into one small tensor, copied to the host once, on an evaluated round together with the
evaluation's scores (:meth:`DivergenceWatch.queue`); Ω and the losses are host numbers already.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.callbacks import RoundCallback
from fedcluster.engine.params import Params
from fedcluster.engine.protocol import Trainer
from fedcluster.errors import DivergedError

GROWTH = 1e3  # rule 2: model norm over the reference norm
STUCK_GROWTH = 10.0  # rule 3: model norm over the reference norm ...
STUCK_EVALUATIONS = 3  # ... with the loss at or above chance on this many evaluations in a row
NORM_FLOOR = 1.0  # the reference norm is at least this


def model_stats(models: Params) -> torch.Tensor:
    """[2, K] on the models' device: each model's largest absolute entry (NaN/inf when an entry is) and its
    Euclidean norm (inf when it overflows float32), computed without a copy of the stack."""
    peaks, squares = [], []
    for v in models.values():
        flat = v.reshape(v.shape[0], -1)
        if flat.shape[1] == 0:
            continue
        low, high = torch.aminmax(flat, dim=1)
        peaks.append(torch.maximum(high, -low).float())
        squares.append(torch.linalg.vector_norm(flat, dim=1).float() ** 2)
    if not peaks:
        first = next(iter(models.values()), None)
        return torch.zeros((2, 0 if first is None else first.shape[0]),
                           device=None if first is None else first.device)
    return torch.stack([torch.stack(peaks).amax(0), torch.stack(squares).sum(0).sqrt()])


class DivergenceWatch(RoundCallback):
    """The rules above for one run (or one resumed session); :meth:`after_round` then, on evaluated rounds,
    :meth:`after_evaluation` (:meth:`on_played`: either, as the round loop's callback). ``unscored``: the losses
    that are NaN by design (a split without samples), never read."""

    def __init__(self, alg: Algorithm, trainer: Trainer, task: str, num_classes: int,
                 unscored: tuple[str, ...] = ()) -> None:
        self.alg, self.trainer, self.unscored = alg, trainer, unscored
        norms = model_stats(alg.models)[1].cpu().tolist()  # once per run
        self.reference = max([NORM_FLOOR, *[n for n in norms if math.isfinite(n)]])
        self.chance = math.log(num_classes) if task == "classification" and num_classes > 1 else None
        self.norm = self.reference  # the largest model norm after the last round
        self.stuck = 0  # consecutive evaluations that met rule 3
        self._queued: tuple[int, list, int, torch.Tensor] | None = None  # the last queued round's numbers
        self._values: torch.Tensor | None = None  # the same numbers until they are taken

    def on_played(self, round_: int, metrics: dict[str, float]) -> None:
        """The checks of a round, with its evaluation's losses when it was evaluated (the evaluation then brought
        the queued numbers back with its scores)."""
        if metrics:
            self.after_evaluation(round_, {k: v for k, v in metrics.items() if k not in self.unscored})
        else:
            self.after_round(round_)

    def after_round(self, round_: int) -> None:
        """Rules 1 and 2 on the trained units, the models and Ω: one host read."""
        self.queue(round_)
        self.check_now()

    def queue(self, round_: int) -> None:
        """Reduce the round's numbers on the device, to be read with :meth:`take_queued` (e.g. in the evaluation's
        copy) and checked with :meth:`check_queued`, or read and checked by :meth:`check_now`."""
        watched = self.trainer.take_watch()
        stats = model_stats(self.alg.models)
        parts = [stats.flatten(), *(s.float().to(stats.device) for _, s in watched)]
        self._queued = (round_, watched, stats.shape[1], torch.cat(parts))
        self._values = self._queued[3]

    def take_queued(self) -> torch.Tensor | None:
        """The queued numbers (on the device) for the caller to copy with its own; None when nothing is queued."""
        values, self._values = self._values, None
        return values

    def check_now(self) -> None:
        """Read the queued numbers (one host sync) and check them, if they were not taken."""
        values = self.take_queued()
        if values is not None:
            self.check_queued(values.cpu().numpy())

    def check_queued(self, values: np.ndarray) -> None:
        """Rules 1 and 2 on the queued round's numbers, read back as ``values``."""
        assert self._queued is not None, "queue() first"
        round_, watched, k, _ = self._queued
        values = np.asarray(values, dtype=np.float64).tolist()
        peaks, norms, unit_peaks = values[:k], values[k:2 * k], np.asarray(values[2 * k:])
        found = []
        if watched:
            clients = np.concatenate([c for c, _ in watched])
            bad = sorted({int(c) for c in clients[~np.isfinite(unit_peaks)]})
            if bad:
                shown = ", ".join(map(str, bad[:10])) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
                found.append(f"local training of client(s) {shown} gave non-finite weights")
        bad_models = [j for j, p in enumerate(peaks) if not math.isfinite(p)]
        if bad_models:
            found.append(f"cluster model(s) {', '.join(map(str, bad_models))} are non-finite")
        if not np.isfinite(np.asarray(self.alg.omega, dtype=float)).all():
            found.append("the client-cluster weights Ω are non-finite")
        self.norm = max(norms, default=0.0)
        if not found and not self.norm <= GROWTH * self.reference:
            grown = [j for j, n in enumerate(norms) if not n <= GROWTH * self.reference]
            found.append(f"the weights of cluster model(s) {', '.join(map(str, grown))} grew more than "
                         f"{GROWTH:g}-fold (norm {self.reference:.3g} at the start, "
                         f"{'beyond 3.4e38' if math.isinf(self.norm) else f'{self.norm:.3g}'} now)")
        if found:
            raise DivergedError(f"training diverged at round {round_}: {'; '.join(found)}")

    def after_evaluation(self, round_: int, metrics: dict[str, float]) -> None:
        """Rule 1 on the evaluated losses and rule 3 (host numbers only)."""
        bad_losses = [k for k in ("val_loss", "test_loss") if k in metrics and not np.isfinite(metrics[k])]
        if bad_losses:
            raise DivergedError(f"training diverged at round {round_}: {' and '.join(bad_losses)} are non-finite")
        losses = [metrics[k] for k in ("val_loss", "test_loss") if k in metrics]
        if self.chance is None or not losses:
            return
        loss = min(losses)
        grown = self.norm / self.reference
        self.stuck = self.stuck + 1 if grown > STUCK_GROWTH and loss >= self.chance else 0
        if self.stuck >= STUCK_EVALUATIONS:
            raise DivergedError(
                f"training diverged at round {round_}: the weights grew {grown:.3g}-fold and the evaluation loss "
                f"({loss:.3g}) has not been below chance level (ln {round(math.exp(self.chance))} = "
                f"{self.chance:.3g}) for {self.stuck} evaluations")

