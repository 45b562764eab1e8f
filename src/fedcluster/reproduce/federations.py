"""Federation helpers of the reproductions: shrink a federation, merge two datasets, the FedMD paper's tiny-client
population."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from fedcluster.catalog.registry import DATASETS
from fedcluster.data.assemble import ClientPlan, assemble
from fedcluster.data.federation import Federation, Split
from fedcluster.data.scenarios.common import full_test, resize_plans
from fedcluster.data.scenarios.rotation import angle_name, rotator


def _keep(split: Split, keep: list[np.ndarray]) -> Split:
    rows = np.concatenate([split.ptr[i] + k for i, k in enumerate(keep)]).astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum([len(k) for k in keep])])
    return Split(split.x[rows], split.y[rows], ptr)


def shrink(fed: Federation, fraction: float, test_size: int, seed: int) -> Federation:
    """Keep a random ``fraction`` of every client's train/validation samples and ``test_size`` per test client
    (0 = all)."""
    rng = np.random.default_rng([seed, 7])

    def part(split: Split, frac: float | None, size: int | None) -> tuple[Split, list[np.ndarray]]:
        keep = []
        for n in split.sizes:
            m = max(1, int(round(frac * n))) if frac is not None else (min(int(size), int(n)) if size else int(n))
            keep.append(np.sort(rng.permutation(int(n))[:m]))
        return _keep(split, keep), keep

    train, keep = part(fed.train, fraction, None)
    val, _ = part(fed.val, fraction, None)
    test, _ = part(fed.test, None, test_size)
    sample_concept = None
    if fed.sample_concept is not None:
        sample_concept = np.concatenate([fed.sample_concept[fed.train.ptr[i] + k] for i, k in enumerate(keep)])
    return Federation(train, val, test, fed.true_cluster, fed.test_cluster, fed.num_classes, fed.task,
                      sample_concept, fed.style, fed.style_names, fed.extras, {**fed.info, "fraction": fraction})


def _resize(split: Split, shape: tuple[int, ...]) -> Split:
    if tuple(split.x.shape[1:]) == shape:
        return split
    x = F.interpolate(split.x, size=shape[-2:], mode="bilinear", align_corners=False)
    return Split(x.contiguous(), split.y, split.ptr)


def _cat(a: Split, b: Split) -> Split:
    return Split(torch.cat([a.x, b.x]), torch.cat([a.y, b.y]), np.concatenate([a.ptr, a.ptr[-1] + b.ptr[1:]]))


def merge(first: Federation, second: Federation) -> Federation:
    """One federation whose clients come from ``first`` (cluster 0) and ``second`` (cluster 1), CFL-GP paper Table 11
    style.

    ``second``'s images are resized to ``first``'s shape (e.g. 8×8 digits to 28×28); both need the same classes.
    """
    if first.num_classes != second.num_classes:
        raise ValueError(f"cannot merge {first.num_classes} and {second.num_classes} classes")
    shape = first.input_shape
    parts = [(_resize(s, shape) if f is second else s) for f in (first, second) for s in (f.train, f.val, f.test)]
    train, val, test = (_cat(parts[i], parts[i + 3]) for i in range(3))
    true = np.concatenate([np.zeros(first.num_clients), np.ones(second.num_clients)])
    test_cluster = np.concatenate([np.zeros(first.test.num_clients), np.ones(second.test.num_clients)])
    info = {"name": f"merge({first.info.get('dataset', 'first')}, {second.info.get('dataset', 'second')})"}
    return Federation(train, val, test, true, test_cluster, first.num_classes, info=info)


def s2_rotation(k: int, clients: int, seed: int, anchor_size: int = 20, client_size: int = 2) -> Federation:
    """FedMD paper §V-D on Fashion-MNIST: k anchors (one per rotation, ``anchor_size`` images) first, then
    ``clients`` tiny clients of ``client_size`` images, rotations {0, 90[, 180, 270]}°, images downsampled to 14×14."""
    data = DATASETS.get("fashion-mnist").obj.load(None)
    angles = [0.0, 90.0] if k == 2 else [0.0, 90.0, 180.0, 270.0][:k]
    rng = np.random.default_rng([seed, 0])
    sizes = np.array([anchor_size] * k + [client_size] * clients)
    if sizes.sum() > len(data.y_train):
        raise ValueError(f"{sizes.sum()} images needed, the training set has {len(data.y_train)}")
    idx = np.split(rng.permutation(len(data.y_train))[: sizes.sum()], np.cumsum(sizes)[:-1])
    cluster = np.concatenate([np.arange(k), rng.integers(k, size=clients)])
    plans = [ClientPlan(i, int(c), None, rotator(angles[c]), int(c)) for i, c in zip(idx, cluster, strict=True)]
    tests = [full_test(data, c, None, rotator(angles[c]), c) for c in range(k)]
    resize_plans(plans + tests, 14)
    info = {"name": "s2-rotation", "dataset": data.name, "k": k, "clients": clients, "angles": angles}
    fed = assemble(data, plans, tests, 0.0, rng, info, [angle_name(a) for a in angles])
    fed.val = fed.train  # 2 images leave nothing to hold out: "val" metrics are training metrics (unused here)
    return fed
