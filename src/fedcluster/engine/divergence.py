"""Stop a run whose training diverged: non-finite weights, responsibilities or losses.

Checked by the runner after every round, outside the methods: the trainer records the clients whose
locally trained units came back non-finite (a NaN/inf loss makes its gradients and so its weights
non-finite), and the server state (K models, Ω) and the evaluated losses are checked directly.
"""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.training import Trainer
from fedcluster.errors import DivergedError


def check_finite(round_: int, alg: Algorithm, trainer: Trainer, metrics: dict[str, float]) -> None:
    """Raise :class:`DivergedError` naming the round, the clients and what went non-finite."""
    clients = trainer.take_nonfinite()
    found = []
    if clients:
        shown = ", ".join(map(str, clients[:10])) + (f" and {len(clients) - 10} more" if len(clients) > 10 else "")
        found.append(f"local training of client(s) {shown} gave non-finite weights")
    bad_models = sorted({k for v in alg.models.values() for k in _bad_units(v)})
    if bad_models:
        found.append(f"cluster model(s) {', '.join(map(str, bad_models))} are non-finite")
    if not np.isfinite(np.asarray(alg.omega, dtype=float)).all():
        found.append("the client-cluster weights Ω are non-finite")
    bad_losses = [k for k in ("val_loss", "test_loss") if k in metrics and not np.isfinite(metrics[k])]
    if bad_losses:
        found.append(f"{' and '.join(bad_losses)} are non-finite")
    if found:
        raise DivergedError(f"training diverged at round {round_}: {'; '.join(found)}")


def _bad_units(stacked: torch.Tensor) -> list[int]:
    if stacked.numel() == 0:
        return []
    ok = torch.isfinite(stacked.reshape(stacked.shape[0], -1)).all(1)
    return [int(i) for i in torch.nonzero(~ok).flatten()]
