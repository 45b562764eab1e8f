"""Tier 4 (client distance metrics): cosine / L2 matrices, HCFL+ prototype distances (S1 eq. 9–12) on digits,
and PACFL's subspace angles."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from fedcluster.data.shifts.corruptions import corrupt
from fedcluster.data.sources.digits import load_digits
from fedcluster.tiers.distance import (
    client_prototypes,
    cluster_matrices,
    confidence_weighted,
    cosine_distance,
    cosine_similarity,
    data_signature,
    parameter_distance,
    prototype_distance,
    subspace_angles,
)

RNG = np.random.default_rng(0)


def test_cosine_and_parameter_distances() -> None:
    x = torch.as_tensor(RNG.standard_normal((5, 3, 4)))
    flat = x.reshape(5, -1).numpy()
    cos = flat @ flat.T / np.outer(np.linalg.norm(flat, axis=1), np.linalg.norm(flat, axis=1))
    np.testing.assert_allclose(cosine_similarity(x), cos, atol=1e-10)
    d = cosine_distance(x)
    np.testing.assert_allclose(d, 1 - cos, atol=1e-10)
    assert (np.diag(d) == 0).all() and np.allclose(d, d.T)
    np.testing.assert_allclose(parameter_distance(x), np.linalg.norm(flat[:, None] - flat[None], axis=-1), atol=1e-10)
    assert cosine_distance(np.stack([np.ones(3), -np.ones(3)]))[0, 1] == pytest.approx(2.0)


def test_prototypes_are_eq_11_and_12() -> None:
    z = torch.as_tensor(RNG.standard_normal((9, 4)))
    y = np.array([0, 1, 0, 2, 0, 1, 1, 1, 0])
    owner = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    p, n = client_prototypes(z, y, owner, 2, num_classes=3)
    assert p.shape == (2, 4, 4) and n.shape == (2, 4)
    for i in range(2):
        for c in range(3):
            rows = (owner == i) & (y == c)
            assert n[i, c] == rows.sum()
            expected = z[torch.as_tensor(rows)].mean(0) if rows.any() else torch.zeros(4, dtype=z.dtype)
            torch.testing.assert_close(p[i, c], expected)
        torch.testing.assert_close(p[i, 3], z[torch.as_tensor(owner == i)].mean(0))  # P_{lf,i}
    assert n[1, 2] == 0  # class 2 absent at client 1


# -- the prototype distance on digits -------------------------------------------------------------------
def _digits(n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    return d.x_train[:n], d.y_train[:n]


def _features(x: np.ndarray) -> torch.Tensor:
    """A fixed random ReLU layer as the feature extractor g(x; φ)."""
    w = torch.as_tensor(np.random.default_rng(1).standard_normal((64, 32)) / 8)
    return torch.relu(torch.as_tensor(x).reshape(len(x), -1).double() @ w)


def _distance(xa, ya, xb, yb, principle: str, reduce: str = "max") -> float:
    z = torch.cat([_features(xa), _features(xb)])
    owner = np.repeat([0, 1], [len(xa), len(xb)])
    p, n = client_prototypes(z, np.concatenate([ya, yb]), owner, 2, 10)
    return float(prototype_distance(p, n, principle, reduce)[0, 1])


def test_prototype_distance_is_zero_for_identical_clients() -> None:
    x, y = _digits()
    for principle in ("ascp", "cscp"):
        for reduce in ("max", "mean"):
            assert _distance(x, y, x, y, principle, reduce) == pytest.approx(0.0, abs=1e-12)


def test_label_swap_grows_the_cscp_distance() -> None:
    x, y = _digits()
    swapped = np.where(y == 0, 1, np.where(y == 1, 0, y))  # concept shift: digits 0 and 1 swap labels
    cscp = _distance(x, y, x, swapped, "cscp")
    assert cscp > 0.05
    assert _distance(x, y, x, swapped, "ascp") == pytest.approx(cscp)  # P(z|x) unchanged: d̃_lf = 0
    three = np.where(y == 2, 3, np.where(y == 3, 2, swapped))  # a second swap can only raise the max
    assert _distance(x, y, x, three, "cscp") >= cscp


def test_feature_corruption_grows_the_ascp_distance() -> None:
    x, y = _digits()
    mild = corrupt(x, "gaussian_noise", 1, np.random.default_rng(2))
    strong = corrupt(x, "gaussian_noise", 5, np.random.default_rng(2))
    d_mild, d_strong = _distance(x, y, mild, y, "ascp"), _distance(x, y, strong, y, "ascp")
    assert 0 < d_mild < d_strong


def test_label_shift_moves_ascp_only() -> None:
    x, y = _digits()
    extra = y == 0  # the same class-conditional data, three times as many zeros: P(y) shifts, P(z|x,y) does not
    xb, yb = np.concatenate([x, x[extra], x[extra]]), np.concatenate([y, y[extra], y[extra]])
    assert _distance(x, y, xb, yb, "cscp") == pytest.approx(0.0, abs=1e-12)
    assert _distance(x, y, xb, yb, "ascp") > 1e-3


def test_absent_classes_are_skipped() -> None:
    x, y = _digits()
    keep = y != 5
    assert _distance(x, y, x[keep], y[keep], "cscp") == pytest.approx(0.0, abs=1e-12)


def test_confidence_weighting_and_cluster_matrices() -> None:
    d = cosine_distance(RNG.standard_normal((5, 6)))
    omega = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6], [0.6, 0.4]])
    np.testing.assert_allclose(confidence_weighted(d, omega[:, 0]), d * np.outer(omega[:, 0], omega[:, 0]))
    members, mats = cluster_matrices(d, omega)
    np.testing.assert_array_equal(members[0], [0, 2, 4])
    np.testing.assert_array_equal(members[1], [1, 3])
    np.testing.assert_allclose(mats[1], d[np.ix_([1, 3], [1, 3])] * np.outer([0.8, 0.6], [0.8, 0.6]))
    np.testing.assert_allclose(cluster_matrices(d, omega, weighted=False)[1][0], d[np.ix_([0, 2, 4], [0, 2, 4])])


# -- PACFL ----------------------------------------------------------------------------------------------------
def test_data_signature_and_subspace_angles() -> None:
    x, y = _digits()
    u = data_signature(x, y, 3)
    assert u.shape == (64, 30)
    np.testing.assert_allclose(np.linalg.norm(u, axis=0), 1.0)
    flip = x[:, :, ::-1, :]  # upside-down digits span other subspaces
    a = subspace_angles([u, u, data_signature(flip, y, 3)])
    assert a[0, 1] == pytest.approx(0.0, abs=1e-5) and a[0, 2] > 1.0
    np.testing.assert_allclose(a, a.T)
    e = np.eye(4)
    ortho = subspace_angles([e[:, :2], e[:, 2:]])
    assert ortho[0, 1] == pytest.approx(90.0)
    q1, q2 = np.linalg.qr(RNG.standard_normal((10, 3)))[0], np.linalg.qr(RNG.standard_normal((10, 2)))[0]
    smallest = np.degrees(scipy.linalg.subspace_angles(q1, q2).min())
    assert subspace_angles([q1, q2], "principal")[0, 1] == pytest.approx(smallest)
    assert subspace_angles([q1, q2])[0, 1] >= smallest - 1e-9  # entry-min never undercuts the principal angle
