"""Seeded distribution-shift primitives: partitions, label maps, geometry, noise, assignment, mixtures."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.data.shifts.assignment import (
    balanced_assignment,
    diverse_shift_assignment,
    ratio_assignment,
    uniform_assignment,
)
from fedcluster.data.shifts.concept import (
    apply_label_map,
    fedrc_label_maps,
    hcfl_beta_label_maps,
    permutation_label_maps,
    shift_label_map,
)
from fedcluster.data.shifts.geometric import (
    ROTATED_MNIST_ANGLES,
    ROTATED_MNIST_GROUPS,
    downsample,
    rotate,
    rotation_clusters,
)
from fedcluster.data.shifts.label import (
    classes_per_client_split,
    dirichlet_split,
    dirichlet_split_global,
    iid_split,
)
from fedcluster.data.shifts.mixture import mix_two
from fedcluster.data.shifts.noise import pair_flip, symmetric_flip


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    return np.random.default_rng(123).permutation(np.repeat(np.arange(10), 300))  # 3000 samples, balanced


def assert_disjoint(parts: list[np.ndarray], n: int) -> np.ndarray:
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(allidx), "client index sets overlap"
    assert allidx.min() >= 0 and allidx.max() < n
    return allidx


def mean_label_entropy(labels: np.ndarray, parts: list[np.ndarray], num_classes: int = 10) -> float:
    ent = []
    for p in parts:
        h = np.bincount(labels[p], minlength=num_classes) / len(p)
        h = h[h > 0]
        ent.append(-(h * np.log(h)).sum())
    return float(np.mean(ent))


# ---------------------------------------------------------------- label splits


def test_iid_split_partition(labels: np.ndarray) -> None:
    parts = iid_split(labels, 7, rng())
    allidx = assert_disjoint(parts, len(labels))
    assert len(allidx) == len(labels)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_dirichlet_split_partition_and_min_size(labels: np.ndarray) -> None:
    parts = dirichlet_split(labels, 20, 0.5, rng(), min_size=10)
    allidx = assert_disjoint(parts, len(labels))
    assert len(allidx) == len(labels)
    assert min(len(p) for p in parts) >= 10


def test_dirichlet_alpha_controls_skew(labels: np.ndarray) -> None:
    for split in (
        lambda a: dirichlet_split(labels, 20, a, rng(1)),
        lambda a: dirichlet_split_global(labels, 20, a, rng(1)),
    ):
        ents = [mean_label_entropy(labels, split(a)) for a in (100.0, 1.0, 0.05)]
        assert ents[0] > ents[1] > ents[2]


def test_dirichlet_global_equal_sizes(labels: np.ndarray) -> None:
    parts = dirichlet_split_global(labels, 30, 1.0, rng())
    assert_disjoint(parts, len(labels))
    assert all(len(p) == len(labels) // 30 for p in parts)
    # uneven total: leftover samples stay unused, sizes still equal
    parts = dirichlet_split_global(labels[:2999], 7, 0.1, rng(), samples_per_client=None)
    assert_disjoint(parts, 2999)
    assert {len(p) for p in parts} == {2999 // 7}
    parts = dirichlet_split_global(labels, 10, 0.5, rng(), samples_per_client=50)
    assert {len(p) for p in parts} == {50}


def test_dirichlet_global_exhausts_classes() -> None:
    # tiny alpha with few samples per class forces the "class runs out" renormalisation
    y = np.repeat(np.arange(5), 20)
    parts = dirichlet_split_global(y, 10, 0.01, rng(3))
    allidx = assert_disjoint(parts, len(y))
    assert len(allidx) == len(y)
    assert {len(p) for p in parts} == {10}


@pytest.mark.parametrize("c", [1, 2, 4])
def test_classes_per_client_exact(labels: np.ndarray, c: int) -> None:
    parts = classes_per_client_split(labels, 100, c, rng(c))
    allidx = assert_disjoint(parts, len(labels))
    assert len(allidx) == len(labels)
    assert all(len(np.unique(labels[p])) == c for p in parts)
    # every class is held by the same number of clients (100·c/10)
    holders = np.bincount(np.concatenate([np.unique(labels[p]) for p in parts]), minlength=10)
    assert np.all(holders == 100 * c // 10)


def test_classes_per_client_uneven_slots(labels: np.ndarray) -> None:
    parts = classes_per_client_split(labels, 7, 3, rng())
    assert len(assert_disjoint(parts, len(labels))) == len(labels)
    assert all(len(np.unique(labels[p])) == 3 for p in parts)


def test_split_errors(labels: np.ndarray) -> None:
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError):
            dirichlet_split(labels, 5, bad, rng())
        with pytest.raises(ValueError):
            dirichlet_split_global(labels, 5, bad, rng())
    with pytest.raises(ValueError):
        dirichlet_split_global(labels, 5, 1.0, rng(), samples_per_client=10_000)
    with pytest.raises(ValueError):
        classes_per_client_split(labels, 5, 11, rng())
    with pytest.raises(ValueError):
        classes_per_client_split(labels, 5, 0, rng())
    with pytest.raises(ValueError):
        iid_split(labels[:3], 5, rng())


def test_splits_deterministic(labels: np.ndarray) -> None:
    for f in (
        lambda r: iid_split(labels, 9, r),
        lambda r: dirichlet_split(labels, 9, 0.3, r),
        lambda r: dirichlet_split_global(labels, 9, 0.3, r),
        lambda r: classes_per_client_split(labels, 9, 2, r),
    ):
        a, b, c = f(rng(5)), f(rng(5)), f(rng(6))
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


# ---------------------------------------------------------------- concept maps


def is_perm(row: np.ndarray) -> bool:
    return np.array_equal(np.sort(row), np.arange(len(row)))


def test_fedrc_maps() -> None:
    m = fedrc_label_maps(10, 3)
    assert m.shape == (3, 10) and all(is_perm(r) for r in m)
    y = np.arange(10)
    assert np.array_equal(m[0], y)
    assert np.array_equal(m[1], 9 - y) and m[1, 0] == 9
    assert np.array_equal(m[2], (y + 1) % 10) and m[2, 9] == 0
    m5 = fedrc_label_maps(10, 5)
    assert all(is_perm(r) for r in m5) and len({tuple(r) for r in m5}) == 5


@pytest.mark.parametrize("beta", [0.1, 0.2, 0.4, 0.8, 0.9, 1.0, 0.0])
def test_hcfl_beta_maps(beta: float) -> None:
    C = 10
    m = hcfl_beta_label_maps(C, 3, beta)
    assert m.shape == (3, C) and all(is_perm(r) for r in m)
    cb = int(np.floor(C * beta + 1e-9))
    k = min(cb + 1, C)
    y = np.arange(C)
    for c in range(3):
        assert np.array_equal(m[c, :k], (y[:k] + c) % k)
        assert np.array_equal(m[c, k:], y[k:])  # unaffected labels stay
    assert np.array_equal(m[0], y)


def test_hcfl_beta_examples() -> None:
    # S1: β = 0.1 on CIFAR10 swaps two labels (0 ↔ 1) in the shifted concept, 8 unchanged
    m = hcfl_beta_label_maps(10, 3, 0.1)
    assert m[1].tolist() == [1, 0, 2, 3, 4, 5, 6, 7, 8, 9]
    assert (m[1] != np.arange(10)).sum() == 2
    # β = 0.2: C_β = 2, labels {0,1,2} rotate; three distinct concepts
    m = hcfl_beta_label_maps(10, 3, 0.2)
    assert m[1, :3].tolist() == [1, 2, 0] and m[2, :3].tolist() == [2, 0, 1]
    assert len({tuple(r) for r in m}) == 3
    # floating-point robustness: ⌊100 · 0.29⌋ = 29 → 30 affected labels
    m = hcfl_beta_label_maps(100, 2, 0.29)
    assert (m[1] != np.arange(100)).sum() == 30


def test_shift_and_permutation_maps() -> None:
    s = shift_label_map(10, 5)
    assert np.array_equal(s, (np.arange(10) + 5) % 10) and is_perm(s)
    m = permutation_label_maps([[0, 1, 2], [2, 0, 1]])
    assert m.dtype == np.int64 and m.shape == (2, 3)
    assert permutation_label_maps(np.array([1, 0])).shape == (1, 2)
    for bad in ([[0, 1, 1]], [[0, 1, 3]], [[0.5, 1, 2]], [[]], [[0, 1], [0, 1, 2]]):
        with pytest.raises(ValueError):
            permutation_label_maps(bad)


def test_apply_label_map() -> None:
    maps = fedrc_label_maps(10, 3)
    y = np.array([0, 9, 3, 0, 9])
    concept = np.array([0, 1, 2, 1, 2])
    assert apply_label_map(y, maps, concept).tolist() == [0, 0, 4, 9, 0]
    assert apply_label_map(y, maps, 1).tolist() == [9, 0, 6, 9, 0]
    assert apply_label_map(y, shift_label_map(10, 5), 0).tolist() == [5, 4, 8, 5, 4]
    with pytest.raises(ValueError):
        apply_label_map(np.array([10]), maps, 0)
    with pytest.raises(ValueError):
        apply_label_map(y, maps, 3)


# ---------------------------------------------------------------- geometry


def test_rotate_exact_quarters() -> None:
    x = rng().random((4, 2, 8, 8), dtype=np.float32)
    assert np.array_equal(rotate(x, 90), np.rot90(x, 1, axes=(-2, -1)))
    assert np.array_equal(rotate(x, 180), np.rot90(x, 2, axes=(-2, -1)))
    assert np.array_equal(rotate(x, -90), np.rot90(x, 3, axes=(-2, -1)))
    assert np.array_equal(rotate(x, 360), x)
    assert np.array_equal(rotate(x, 0), x)


def test_rotate_small_angle() -> None:
    x = np.zeros((2, 1, 28, 28), dtype=np.float32)
    x[:, :, 8:20, 12:16] = 1.0
    r = rotate(x, 15)
    assert r.shape == x.shape and r.dtype == np.float32
    assert not np.allclose(r, x)
    assert abs(r.sum() - x.sum()) / x.sum() < 0.05  # content stays inside the frame
    # consistent direction with the exact path: 89.9° ≈ 90°
    assert np.abs(rotate(x, 89.9) - rotate(x, 90)).mean() < 0.02


def test_downsample() -> None:
    x = rng().random((3, 1, 28, 28), dtype=np.float32)
    d = downsample(x, 14)
    assert d.shape == (3, 1, 14, 14) and d.dtype == np.float32
    assert np.allclose(d[0, 0, 0, 0], x[0, 0, :2, :2].mean())
    assert np.allclose(d.mean(axis=(-2, -1)), x.mean(axis=(-2, -1)), atol=1e-6)
    d10 = downsample(x, (10, 7))  # non-integer factors: area weights
    assert d10.shape == (3, 1, 10, 7)
    assert np.allclose(d10.mean(axis=(-2, -1)), x.mean(axis=(-2, -1)), atol=1e-5)
    assert np.allclose(downsample(np.ones((1, 1, 28, 28)), 9), 1.0)
    with pytest.raises(ValueError):
        downsample(x, 30)


def test_rotation_clusters() -> None:
    ids = rotation_clusters(ROTATED_MNIST_ANGLES)
    assert ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert rotation_clusters(ROTATED_MNIST_ANGLES, ROTATED_MNIST_GROUPS).tolist() == ids.tolist()
    assert rotation_clusters([0, 90, 180, 270]).tolist() == [0, 1, 2, 3]
    assert rotation_clusters([180, 0, 180]).tolist() == [1, 0, 1]
    assert rotation_clusters([0, 185, 275], [[0, 15], [180, 185], [270, 275]]).tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        rotation_clusters([45], [[0], [90]])
    with pytest.raises(ValueError):
        rotation_clusters([0], [[0], [360]])


# ---------------------------------------------------------------- label noise


@pytest.mark.parametrize("flip", [symmetric_flip, pair_flip])
@pytest.mark.parametrize("rate", [0.0, 0.1, 0.4, 1.0])
def test_flip_rates(flip, rate: float) -> None:
    y = rng(9).integers(0, 10, size=1001)
    new, mask = flip(y, 10, rate, rng())
    assert mask.sum() == round(rate * len(y))
    assert np.all(new[mask] != y[mask]) and np.array_equal(new[~mask], y[~mask])
    assert new.min() >= 0 and new.max() < 10
    if flip is pair_flip:
        assert np.array_equal(new[mask], (y[mask] + 1) % 10)


def test_symmetric_flip_uniform_over_others() -> None:
    y = np.zeros(20_000, dtype=np.int64)
    new, mask = symmetric_flip(y, 5, 0.5, rng())
    counts = np.bincount(new[mask], minlength=5)
    assert counts[0] == 0
    assert np.allclose(counts[1:] / mask.sum(), 0.25, atol=0.02)


def test_flip_errors_and_determinism() -> None:
    y = np.arange(10) % 3
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError):
            symmetric_flip(y, 3, bad, rng())
        with pytest.raises(ValueError):
            pair_flip(y, 3, bad, rng())
    with pytest.raises(ValueError):
        symmetric_flip(y, 2, 0.5, rng())  # label 2 out of range
    a, b = symmetric_flip(y, 3, 0.5, rng(4)), symmetric_flip(y, 3, 0.5, rng(4))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# ---------------------------------------------------------------- client assignment


def test_ratio_assignment() -> None:
    g = ratio_assignment(100, [8, 1, 1], rng())
    assert np.bincount(g).tolist() == [80, 10, 10]
    assert np.bincount(ratio_assignment(10, [0.2, 0.3, 0.5], rng())).tolist() == [2, 3, 5]
    assert np.bincount(ratio_assignment(7, [1, 1, 1], rng())).sum() == 7
    for bad in ([8, 0, 1], [1, -1], [], [1, np.nan]):
        with pytest.raises(ValueError):
            ratio_assignment(10, bad, rng())


def test_balanced_and_uniform_assignment() -> None:
    counts = np.bincount(balanced_assignment(32, 8, rng()))
    assert counts.tolist() == [4] * 8
    counts = np.bincount(balanced_assignment(10, 3, rng()))
    assert counts.max() - counts.min() <= 1 and counts.sum() == 10
    u = uniform_assignment(3000, 3, rng())
    assert u.min() == 0 and u.max() == 2
    assert np.allclose(np.bincount(u) / 3000, 1 / 3, atol=0.04)
    with pytest.raises(ValueError):
        balanced_assignment(10, 0, rng())


def test_diverse_shift_assignment() -> None:
    concept, corrupted = diverse_shift_assignment(300, rng())
    assert concept.shape == corrupted.shape == (300,) and corrupted.dtype == bool
    assert ((concept == 0) & ~corrupted).sum() == 90
    assert ((concept == 0) & corrupted).sum() == 60
    for k in (1, 2):
        assert (concept == k).sum() == 75 and ((concept == k) & corrupted).sum() == 15
    c100, k100 = diverse_shift_assignment(100, rng())
    assert np.bincount(c100).tolist() == [50, 25, 25] and k100.sum() == 30
    c1, k1 = diverse_shift_assignment(100, rng(), num_concepts=1)
    assert np.all(c1 == 0) and k1.sum() == 30
    c5, _ = diverse_shift_assignment(300, rng(), num_concepts=5)
    assert np.bincount(c5)[0] == 150 and set(np.bincount(c5)[1:].tolist()) <= {37, 38}
    a, b = diverse_shift_assignment(300, rng(7)), diverse_shift_assignment(300, rng(7))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# ---------------------------------------------------------------- mixtures


@pytest.mark.parametrize("kappa", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_mix_two_exact(kappa: float) -> None:
    a, b = np.arange(0, 1000), np.arange(1000, 2000)
    idx, src = mix_two(a, b, kappa, 400, rng())
    assert len(idx) == 400 and len(np.unique(idx)) == 400
    assert (src == 0).sum() == round(kappa * 400)
    assert np.all((idx < 1000) == (src == 0))


def test_mix_two_bernoulli_and_errors() -> None:
    a, b = np.arange(0, 5000), np.arange(5000, 10000)
    _, src = mix_two(a, b, 0.3, 4000, rng(), exact=False)
    assert abs((src == 0).mean() - 0.3) < 0.03
    x1, s1 = mix_two(a, b, 0.3, 100, rng(2))
    x2, s2 = mix_two(a, b, 0.3, 100, rng(2))
    assert np.array_equal(x1, x2) and np.array_equal(s1, s2)
    with pytest.raises(ValueError):
        mix_two(a, b, 1.2, 10, rng())
    with pytest.raises(ValueError):
        mix_two(a[:5], b, 0.9, 100, rng())
