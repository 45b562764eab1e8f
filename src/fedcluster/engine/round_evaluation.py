"""The round's evaluation in one place: every split scored per client with what the method predicts with
(:meth:`~fedcluster.engine.algorithm.Algorithm.prediction`, mixed by :meth:`~fedcluster.engine.algorithm.Algorithm.
predict`), where the clients' data are (``Trainer.per_client``), and copied to the host once."""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.data.federation import Federation, Split
from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.divergence import DivergenceWatch
from fedcluster.engine.evaluation.scores import client_scores_on_device, mean_over_clients
from fedcluster.metrics.clustering import clustering_ari


def evaluate(alg: Algorithm, fed: Federation, train: bool = False, watch: DivergenceWatch | None = None
             ) -> tuple[dict[str, float], np.ndarray]:
    """Round metrics and the per-client validation accuracy; with ``train`` also ``train_acc``, the mean over
    clients of the accuracy on their own training data with the model(s) the method uses for them (the
    prediction path of ``val_acc``). The per-client scores of every split (and the queued checks of ``watch``,
    which are then run) come back from the device in one copy."""
    splits = [(fed.val, True), (fed.test, False), *([(fed.train, True)] if train else [])]
    parts = [device_scores(alg, split, participating) for split, participating in splits]
    pending = watch.take_queued() if watch is not None else None
    host = to_host([*parts, *([pending] if pending is not None else [])])
    if watch is not None and pending is not None:
        watch.check_queued(host.pop())
    (val_acc, val_loss), (test_acc, test_loss) = ((h[:, 0], h[:, 1]) for h in host[:2])
    metrics = {
        "val_acc": mean_over_clients(val_acc, fed.val), "test_acc": mean_over_clients(test_acc, fed.test),
        "ari": clustering_ari(fed.true_cluster, alg.assignment(), alg.num_clusters),
        "val_loss": mean_over_clients(val_loss, fed.val), "test_loss": mean_over_clients(test_loss, fed.test),
    }
    if train:
        metrics["train_acc"] = mean_over_clients(host[2][:, 0], fed.train)
    return metrics, val_acc


def device_scores(alg: Algorithm, split: Split, participating: bool) -> np.ndarray | torch.Tensor:
    """[clients, 2] per-client accuracy and mean loss of ``alg``'s predictions on ``split``, computed where the
    clients' data are (Trainer.per_client); in process a tensor left on the device."""
    def compute(part: Split) -> torch.Tensor:
        return client_scores_on_device(alg.predict(part, participating), part, alg.ctx.fed.task)

    return alg.ctx.trainer.per_client(split, compute)


def to_host(parts: list[np.ndarray | torch.Tensor]) -> list[np.ndarray]:
    """Each part as a float64 NumPy array; the tensors among them copied from the device together, once."""
    tensors = [p for p in parts if isinstance(p, torch.Tensor)]
    if not tensors:
        return [np.asarray(p, dtype=np.float64) for p in parts]
    flat = torch.cat([t.reshape(-1).to(tensors[0].device, torch.float64) for t in tensors]).cpu().numpy()
    out, at = [], 0
    for p in parts:
        if isinstance(p, torch.Tensor):
            out.append(flat[at:at + p.numel()].reshape(tuple(p.shape)))
            at += p.numel()
        else:
            out.append(np.asarray(p, dtype=np.float64))
    return out
