"""Batched evaluation: outputs of K models on a whole split, mixed per client, scored per client."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedcluster.data.federation import Split
from fedcluster.engine.evaluation import inference
from fedcluster.engine.evaluation.holdout import scored_rows
from fedcluster.engine.params import Params, num_units
from fedcluster.engine.transfer import to_device


@torch.no_grad()
def model_outputs(module: nn.Module, models: Params, x: torch.Tensor, chunk: int = 8192) -> torch.Tensor:
    """[K, N, out] outputs of each of the K stacked models on every row of ``x`` (on an accelerator: the K
    models vmapped, as many rows per call as the free memory allows)."""
    if inference.row_budget(x.device) is not None:
        return inference.StackForward(module)(models, x)
    outs = []
    for k in range(num_units(models)):
        pk = {n: v[k] for n, v in models.items()}
        outs.append(torch.cat([functional_call(module, pk, (x[i:i + chunk],))
                               for i in range(0, len(x), chunk)] or [x.new_zeros(0)]))
    return torch.stack(outs)


def per_sample_losses(outputs: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    """[K, N] loss of each model on each sample (cross-entropy, or squared error for regression)."""
    if task == "classification":
        K, N, C = outputs.shape
        return F.cross_entropy(outputs.reshape(K * N, C), y.repeat(K), reduction="none").view(K, N)
    return (outputs.squeeze(-1) - y) ** 2


def mix_predictions(outputs: torch.Tensor, weights: torch.Tensor, owner: np.ndarray, task: str
                    ) -> torch.Tensor:
    """Σ_k ω_{i;k} p_k(x) per sample (softmax probabilities, or raw outputs for regression)."""
    index = to_device(owner, outputs.device)
    w = weights.to(outputs.device)[index].T.unsqueeze(-1).to(outputs.dtype)  # [K, N, 1]
    probs = outputs.softmax(-1) if task == "classification" else outputs
    return (w * probs).sum(0)


def client_scores_on_device(pred: torch.Tensor, split: Split, task: str) -> torch.Tensor:
    """[clients, 2] float64 on ``pred``'s device: each client's accuracy (NaN for regression) and mean loss of
    the mixed predictions ``pred`` over the scored rows of ``split`` (all rows, or those outside its ``fit`` mask:
    evaluation.holdout); NaN for a client without scored rows. Summed in row order, as :func:`client_scores` does."""
    scored = scored_rows(split)
    owner = split.owner()[scored]
    counts = np.bincount(owner, minlength=split.num_clients)
    device = pred.device
    rows, index = to_device(scored, device), to_device(owner, device)
    sizes = to_device(np.maximum(counts, 1).astype(np.float64), device)
    y = split.y[rows]
    if task == "classification":
        p = pred[rows]
        correct = (p.argmax(-1) == y).double()
        loss = -torch.log(p.gather(1, y.view(-1, 1)).squeeze(1).clamp_min(1e-12)).double()
        acc = torch.zeros(split.num_clients, dtype=torch.float64, device=device).index_add_(0, index, correct) / sizes
    else:
        loss = ((pred[rows].squeeze(-1) - y) ** 2).double()
        acc = torch.full((split.num_clients,), float("nan"), dtype=torch.float64, device=device)
    mean_loss = torch.zeros(split.num_clients, dtype=torch.float64, device=device).index_add_(0, index, loss) / sizes
    out = torch.stack([acc, mean_loss], 1)
    empty = counts == 0
    if empty.any():  # no samples, no score: NaN, never a 0 that looks real
        out[to_device(np.flatnonzero(empty), device)] = float("nan")
    return out


def client_scores(pred: torch.Tensor, split: Split, task: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-client accuracy (NaN for regression) and mean loss of mixed predictions ``pred`` over the scored
    rows of ``split`` (all rows, or those outside its ``fit`` mask: evaluation.holdout); the per-sample scores are
    the only thing copied back from the device."""
    scored = scored_rows(split)  # rows outside the mask are left out, not weighted 0: inf × 0 would be NaN
    owner = split.owner()[scored]
    counts = np.bincount(owner, minlength=split.num_clients)
    sizes = np.maximum(counts, 1)
    if task == "classification":
        correct = (pred.argmax(-1) == split.y).double().cpu().numpy()
        loss = -torch.log(pred.gather(1, split.y.view(-1, 1)).squeeze(1).clamp_min(1e-12)).double().cpu().numpy()
        acc = np.bincount(owner, correct[scored], split.num_clients) / sizes
    else:
        loss = ((pred.squeeze(-1) - split.y) ** 2).double().cpu().numpy()
        acc = np.full(split.num_clients, np.nan)
    mean_loss = np.bincount(owner, loss[scored], split.num_clients) / sizes
    empty = counts == 0
    if empty.any():  # no samples, no score: NaN, never a 0 that looks real
        acc, mean_loss = np.where(empty, np.nan, acc), np.where(empty, np.nan, mean_loss)
    return acc, mean_loss


def mean_over_clients(values: np.ndarray, split: Split) -> float:
    """Mean of a per-client score over the clients that have samples (NaN when none has)."""
    has = split.sizes > 0
    if has.all():
        return float(np.mean(values))
    return float(np.mean(values[has])) if has.any() else float("nan")


def missing_validation_note(split: Split, knob: str = "scenario.val_fraction") -> str | None:
    """What to tell the user when clients have no validation samples (their val_acc is NaN)."""
    empty = int((split.sizes == 0).sum())
    if empty == 0:
        return None
    if empty == split.num_clients:
        return (f"no client has validation data ({knob}=0?): val_acc and val_loss are reported as nan "
                "and summary.json has no best-validation round; raise the fraction to validate")
    return f"{empty} of {split.num_clients} clients have no validation data: val_acc/val_loss average the others"


def client_outputs(module: nn.Module, local: Params, split: Split, clients: np.ndarray
                   ) -> tuple[torch.Tensor, np.ndarray]:
    """[K', N, out] outputs of each client's own models ``local`` [m, K', ...] on its rows of ``split``, and
    those rows (for personalised / fine-tuned predictions). On an accelerator the clients' models run vmapped,
    as many clients per call as the free memory allows."""
    if inference.row_budget(split.x.device) is not None:
        lo, hi = split.ptr[clients], split.ptr[clients + 1]
        rows = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)] or [np.zeros(0, np.int64)])
        group = np.repeat(np.arange(len(clients)), hi - lo)
        return inference.StackForward(module).grouped(local, split.x, rows, group), rows
    outs: list[torch.Tensor] = []
    parts: list[np.ndarray] = []
    for i, c in enumerate(clients):
        lo, hi = int(split.ptr[c]), int(split.ptr[c + 1])
        if hi > lo:
            outs.append(model_outputs(module, {n: v[i] for n, v in local.items()}, split.x[lo:hi]))
            parts.append(np.arange(lo, hi))
    if not outs:
        return torch.zeros(0, device=split.x.device), np.zeros(0, np.int64)
    return torch.cat(outs, 1), np.concatenate(parts)
