"""Local solver settings shared by every training path."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Solver:
    """Minibatch SGD with momentum and weight decay, optionally with FedProx's proximal term.

    The local objective of a unit is  Σ_j w_j ℓ(x_j, y_j; θ) / |batch|  +  (μ/2)‖θ − θ_anchor‖²
    (FedProx, Li et al. 2020, eq. 2), minimised for ``epochs`` passes with batches of ``batch_size``.
    """

    lr: float
    epochs: int = 1
    batch_size: int = 32
    momentum: float = 0.0
    weight_decay: float = 0.0
    prox_mu: float = 0.0
    max_steps: int | None = None  # cap on local steps per unit (e.g. The FedMD paper's s local steps)
    drop_last: bool = False  # drop each epoch's short last batch (PyTorch DataLoader's drop_last)
