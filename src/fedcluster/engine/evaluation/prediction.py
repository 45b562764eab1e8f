"""What a method predicts with, as functions of its K stacked models, its client weights Ω and its rule for clients
that never trained (the methods' :meth:`~fedcluster.engine.algorithm.Algorithm.prediction` hook calls them).

Prediction for a client mixes the models' softmax outputs with its row of weights: Σ_k ω_{i;k} softmax(m_k(x))
(FedEM/FedRC's rule; for a one-hot row it is the assigned model's prediction). A participating client's row is
its row of Ω; a test client's is the method's ``rule`` (outputs of the K models on its labelled rows → weights),
fitted on the rows of its ``fit`` mask (:mod:`fedcluster.engine.evaluation.holdout`). On the CPU, where every row
is one-hot, each client's rows run through its own model only: the same predictions, 1/K of the work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from fedcluster.data.federation import Split
from fedcluster.engine.evaluation import inference
from fedcluster.engine.evaluation.inference import StackForward
from fedcluster.engine.evaluation.scores import mix_predictions, per_sample_losses
from fedcluster.engine.params import Params
from fedcluster.engine.transfer import to_device

Weights = torch.Tensor | np.ndarray
Prediction = tuple[torch.Tensor, Weights]  # [K', N, out] outputs on every row and the [clients, K'] weights mixing them
Rule = Callable[[torch.Tensor, Split], Weights]  # a test client's weights from the K outputs on its labelled rows


class Likelihood(Protocol):
    """A tier-1 formulation as the test rule reads it: per-sample log-likelihoods from per-sample losses."""

    def loglik(self, losses: np.ndarray, x: torch.Tensor | None, labels: np.ndarray, stats: Any) -> np.ndarray: ...


class TestRule(Protocol):
    """A tier-2 weighting as the test rule reads it: the weights of clients that never trained."""

    def test(self, loglik: np.ndarray, owner: np.ndarray, m: int, k: int) -> np.ndarray: ...


def lowest_loss_weights(outputs: torch.Tensor, split: Split, task: str, k: int) -> torch.Tensor:
    """One-hot [clients, K] rows: the cluster with the lowest loss on each client's labelled rows (how the FedRC
    paper's reference code assigns test clients for hard methods); on the outputs' device."""
    losses = per_sample_losses(outputs, split.y, task).double()  # [K, N]
    index = to_device(split.owner(), outputs.device)
    total = losses.new_zeros((len(losses), split.num_clients)).index_add_(1, index, losses)  # in row order
    return torch.nn.functional.one_hot(total.argmin(0), k).float()


def tier_weights(outputs: torch.Tensor, split: Split, task: str, formulation: Likelihood, stats: Any,
                 weighting: TestRule, k: int) -> np.ndarray:
    """[clients, K] weights from a method's tier parts with the models fixed: the tier-1 log-likelihoods of each
    client's labelled rows, then the tier-2 rule for clients that never trained (soft EM: E-steps, as FedRC paper
    App. H.2 does for FedRC/FedEM; hard rules: the cluster with the lowest mean loss, FedRC paper H.8)."""
    losses = per_sample_losses(outputs, split.y, task).T.double()
    both = torch.cat([losses, split.y.double().unsqueeze(1)], 1).cpu().numpy()  # losses and labels: one copy
    y = both[:, -1].astype(np.int64) if task == "classification" else both[:, -1]
    ll = formulation.loglik(both[:, :-1], split.x, y, stats)
    return weighting.test(ll, split.owner(), split.num_clients, k)


def fit_weights(outputs: torch.Tensor, split: Split, rule: Rule) -> Weights:
    """``rule`` fitted on the rows of ``split`` in its ``fit`` mask only (all rows without a mask), so that a test
    client's cluster choice is not made on the labels it is scored on."""
    if split.fit is None:
        return rule(outputs, split)
    return rule(outputs[:, to_device(split.fit, outputs.device)], split.rows(split.fit))


def chosen_outputs(forward: StackForward, models: Params, split: Split, cluster: np.ndarray,
                   shared_body: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Each client's rows through its ``cluster``'s model alone (CPU): [1, N, out] with weight 1, the mix of a one-hot
    Ω without running the other K − 1 models on every row."""
    outputs = forward.chosen(models, split.x, np.asarray(cluster)[split.owner()], shared_body)
    return outputs, torch.ones(split.num_clients, 1, device=split.x.device)


def omega_prediction(forward: StackForward, models: Params, split: Split, omega: Weights,
                     shared_body: bool = False) -> Prediction:
    """Clients mixing the K ``models`` with their rows of ``omega``; on the CPU, when every row is one-hot (a hard
    method), each client's own model only (:func:`chosen_outputs`)."""
    if inference.row_budget(split.x.device) is None and one_hot_rows(omega):
        return chosen_outputs(forward, models, split, on_host(omega).argmax(1), shared_body)
    return forward(models, split.x, shared_body), omega


def test_prediction(forward: StackForward, models: Params, split: Split, rule: Rule,
                    shared_body: bool = False) -> Prediction:
    """Test clients, weighted by ``rule`` fitted on their ``fit`` rows (:func:`fit_weights`). On the CPU with a
    ``fit`` mask the K models run on the rows that choose the weights only (with K > 1); when the choice is hard,
    each client's other rows run its chosen model alone (:func:`chosen_outputs`), otherwise the K models run on
    them too."""
    k = len(next(iter(models.values())))
    if inference.row_budget(split.x.device) is not None or split.fit is None or k == 1:
        outputs = forward(models, split.x, shared_body)
        return outputs, fit_weights(outputs, split, rule)
    fit = np.asarray(split.fit, dtype=bool)
    fit_rows, other_rows = torch.as_tensor(np.flatnonzero(fit)), torch.as_tensor(np.flatnonzero(~fit))
    fitted = forward(models, split.x[fit_rows], shared_body)
    weights = rule(fitted, split.rows(fit))
    if one_hot_rows(weights):
        return chosen_outputs(forward, models, split, on_host(weights).argmax(1), shared_body)
    outputs = fitted.new_empty((len(fitted), len(split.x), *fitted.shape[2:]))
    outputs[:, fit_rows] = fitted
    outputs[:, other_rows] = forward(models, split.x[other_rows], shared_body)
    return outputs, weights


def untrained_omega(omega: np.ndarray, missing: np.ndarray, rule: Rule,
                    outputs_of: Callable[[torch.Tensor], torch.Tensor],
                    per_client: Callable[[Split, Callable[[Split], np.ndarray]], Any], train: Split) -> np.ndarray:
    """Ω with the rows of the ``missing`` clients (never trained) set by ``rule`` on their own training rows, as
    FedRC paper App. H.2 does for any client that did not train (``per_client``: computed where each client's data
    are); ``omega`` itself is left unchanged."""

    def weights(split: Split) -> np.ndarray:  # each missing client's Ω row from its own rows
        part = split.rows(missing[split.owner()])
        return np.asarray(rule(outputs_of(part.x), part), dtype=np.float64)

    w = per_client(train, weights)
    out = omega.copy()
    out[missing] = w[missing]
    return out


def mixed(prediction: Prediction, split: Split, task: str) -> torch.Tensor:
    """Mixed predictions Σ_k w_{i;k} p_k(x) for every sample of ``split`` from a method's outputs and weights."""
    outputs, weights = prediction
    return mix_predictions(outputs, to_device(weights, outputs.device, torch.float32), split.owner(), task)


def one_hot_rows(weights: Weights) -> bool:
    """Whether every row of ``weights`` (on the host or the CPU) is one-hot: a hard assignment."""
    w = on_host(weights)
    return w.ndim == 2 and bool(((w == 0) | (w == 1)).all() and (w.sum(1) == 1).all())


def on_host(weights: Weights) -> np.ndarray:
    """``weights`` as a NumPy array (a tensor copied to the host first)."""
    return weights.cpu().numpy() if isinstance(weights, torch.Tensor) else np.asarray(weights)
