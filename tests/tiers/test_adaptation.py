"""Tier 3 (adaptive procedure): weight updates of S1 Alg. 4/5, stable ids, and the split/merge decision rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.tiers.adaptation import (
    CFLRule,
    bipartition,
    cfl_statistics,
    choose_split,
    low_mass_clusters,
    removal_set,
    split_gap,
)
from fedcluster.tiers.cluster_book import (
    ClusterBook,
    append_model,
    hard_split_weights,
    keep_models,
    merge_clusters,
    merge_weights,
    remove_clusters,
    remove_statistics,
    remove_weights,
    reposition,
    soft_remove,
    soft_split,
    split_off,
    split_statistics,
    split_weights,
)
from fedcluster.tiers.distance import cosine_similarity
from fedcluster.tiers.regrouping import (
    icfl_bipartition,
    icfl_connectivity,
    icfl_threshold,
    stocfl_merges,
    threshold_clusters,
)

RNG = np.random.default_rng(0)


def _on_simplex(w: np.ndarray) -> None:
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=0, atol=1e-12)


# -- Algorithm 4 / 5 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4,), (7, 4), (3, 5, 4)])  # one row, Ω [M, K], sample weights [m, N_i, K]
def test_split_halves_weights_as_algorithm_4(shape) -> None:
    w = RNG.dirichlet(np.ones(shape[-1]), shape[:-1]) if len(shape) > 1 else RNG.dirichlet(np.ones(4))
    out = split_weights(w, 1)
    assert out.shape == shape[:-1] + (shape[-1] + 1,)
    np.testing.assert_allclose(out[..., 1], w[..., 1] / 2)  # ω_{i,j;k*} ← ω_{i,j;k*}/2   (Alg. 4 lines 7, 9)
    np.testing.assert_allclose(out[..., -1], w[..., 1] / 2)  # ω_{i,j;K^t+1} = ω_{i,j;k*}/2 (lines 6, 8)
    np.testing.assert_array_equal(np.delete(out, [1, shape[-1]], -1), np.delete(w, 1, -1))  # others untouched
    _on_simplex(out)


def test_removal_renormalises_as_algorithm_5() -> None:
    w = RNG.dirichlet(np.ones(5), 9)
    out = remove_weights(w, 2)
    keep = [0, 1, 3, 4]
    np.testing.assert_allclose(out, w[:, keep] / w[:, keep].sum(1, keepdims=True))  # ω_k / Σ_{n≠k_r} ω_n
    _on_simplex(out)
    both = remove_weights(w, [1, 3])  # one call = one removal after the other (Alg. 2 lines 29–31)
    np.testing.assert_allclose(both, remove_weights(remove_weights(w, 3), 1))
    _on_simplex(both)
    omega, sample = soft_remove(w, [1, 3], RNG.dirichlet(np.ones(5), 40))
    np.testing.assert_allclose(omega, both)
    _on_simplex(sample)
    assert soft_split(w, 0)[1] is None and soft_split(w, 0, sample)[1].shape == (40, 4)
    stuck = remove_weights(np.array([[0.0, 1.0, 0.0]]), 1)  # no mass left on the survivors → uniform
    np.testing.assert_allclose(stuck, [[0.5, 0.5]])


def test_every_row_stays_on_the_simplex_through_splits_and_removals() -> None:
    omega = RNG.dirichlet(np.ones(3), 20)  # client-wise ω̃
    sample = RNG.dirichlet(np.ones(3), 200)  # sample-wise ω_{i,j;k}
    book = ClusterBook.start(3)
    for step in range(12):
        if step % 3 == 2 and book.k > 1:
            r = removal_set(omega)
            r = r if len(r) else np.array([int(RNG.integers(book.k))])
            keep = book.remove(step, r)
            omega, sample = remove_weights(omega, r), remove_weights(sample, r)
            assert len(keep) == omega.shape[1]
        else:
            k = int(RNG.integers(book.k))
            assert book.split(step, k) == omega.shape[1]  # the new cluster takes position K^t
            omega, sample = split_weights(omega, k), split_weights(sample, k)
        _on_simplex(omega)
        _on_simplex(sample)
        assert book.k == omega.shape[1] == sample.shape[1]


def test_hard_split_and_merge_keep_one_hot_rows() -> None:
    w = np.eye(3)[[0, 0, 0, 1, 2, 0]]
    out = hard_split_weights(w, 0, np.array([False, True, False, False, False, True]))
    np.testing.assert_array_equal(out.argmax(1), [0, 3, 0, 1, 2, 3])
    _on_simplex(out)
    assert set(np.unique(out)) == {0.0, 1.0}
    soft = RNG.dirichlet(np.ones(4), 6)
    merged = merge_weights(soft, 1, [3, 0])
    np.testing.assert_allclose(merged[:, 0], soft[:, 1] + soft[:, 3] + soft[:, 0])
    np.testing.assert_allclose(merged[:, 1], soft[:, 2])
    _on_simplex(merged)
    np.testing.assert_array_equal(merge_weights(w, 1, [2]).argmax(1), [0, 0, 0, 1, 1, 0])


# -- stable ids ---------------------------------------------------------------------------------------
def test_cluster_book_keeps_ids_through_split_merge_remove() -> None:
    book = ClusterBook.start(2)  # ids [0, 1]
    assert book.split(1, 0, clients=[4, 5]) == 2 and book.ids == [0, 1, 2]
    assert book.split(2, 2) == 3 and book.ids == [0, 1, 2, 3]
    keep = book.merge(3, [(1, [3])])
    np.testing.assert_array_equal(keep, [0, 1, 2])
    assert book.ids == [0, 1, 2]
    keep = book.remove(4, [0])
    np.testing.assert_array_equal(keep, [1, 2])
    assert book.ids == [1, 2] and book.position(2) == 1
    assert book.split(5, 1) == 2 and book.ids == [1, 2, 4]  # ids are never reused
    kinds = [(e.round, e.kind, e.cluster, e.others) for e in book.events]
    assert kinds == [(1, "split", 0, (2,)), (2, "split", 2, (3,)), (3, "merge", 1, (3,)), (4, "remove", 0, ()),
                     (5, "split", 2, (4,))]
    assert book.events[0].clients == (4, 5) and book.count(3, "merge") == 1
    again = ClusterBook.from_state(book.state_dict())
    assert again == book


def test_model_stack_helpers() -> None:
    models = {"w": torch.arange(6.0).view(3, 2)}
    grown = append_model(models, {"w": models["w"][1]})
    assert grown["w"].shape == (4, 2) and torch.equal(grown["w"][3], models["w"][1])
    assert torch.equal(keep_models(grown, np.array([3, 0]))["w"], torch.tensor([[2.0, 3.0], [0.0, 1.0]]))


def test_cluster_changes_keep_models_ids_and_client_positions_together() -> None:
    book, models = ClusterBook.start(3), {"w": torch.arange(3.0).view(3, 1)}  # ids 0 1 2 at positions 0 1 2
    models, new = split_off(models, book, 1, 1, {"w": torch.tensor([9.0])}, [4])
    assert new == 3 and book.ids == [0, 1, 2, 3] and models["w"].flatten().tolist() == [0.0, 1.0, 2.0, 9.0]
    clients = np.array([0, 1, 2, 3, -1])
    merged, kept, remap = merge_clusters(models, book, 2, [(0, [2])])  # id 2 folds into id 0
    assert kept.tolist() == [0, 1, 3] and book.ids == [0, 1, 3] and merged["w"].flatten().tolist() == [0.0, 1.0, 9.0]
    assert reposition(clients, kept, 4, remap).tolist() == [0, 1, 0, 2, -1]
    fewer, kept = remove_clusters(merged, book, 3, [1])  # id 1 removed: its clients have no cluster
    assert kept.tolist() == [0, 2] and book.ids == [0, 3] and fewer["w"].flatten().tolist() == [0.0, 9.0]
    assert reposition(np.array([0, 1, 2, -1]), kept, 3).tolist() == [0, -1, 1, -1]
    assert [e.kind for e in book.events] == ["split", "merge", "remove"]


# -- HCFL+ split test (eq. 8) and removal set ----------------------------------------------------------
def _two_groups(n1: int = 3, n2: int = 4, far: float = 1.0, near: float = 0.1) -> np.ndarray:
    labels = np.array([0] * n1 + [1] * n2)
    d = np.where(labels[:, None] == labels[None, :], near, far)
    np.fill_diagonal(d, 0.0)
    return d


def test_eq8_split_test_and_choice_of_cluster() -> None:
    d = _two_groups()
    assert split_gap(d) == pytest.approx(d.max() - d.mean())
    off = d[~np.eye(7, dtype=bool)].mean()
    assert split_gap(d, include_diagonal=False) == pytest.approx(d.max() - off)
    small = _two_groups(2, 2, far=0.3, near=0.2)
    k, labels = choose_split([small, d, np.zeros((1, 1))], rho=0.3)
    assert k == 1  # k* = argmax_k max(D_k) (E.1-6)
    np.testing.assert_array_equal(labels, [1, 1, 1, 0, 0, 0, 0])  # the larger group keeps the id
    gap = split_gap(d)
    assert choose_split([d], rho=gap) is not None  # eq. 8 is "≥ ρ"
    assert choose_split([d], rho=gap, strict=True) is None  # the [ref-code]'s ">"
    assert choose_split([d], rho=gap + 1e-9) is None
    assert choose_split([np.zeros((1, 1))], rho=0.0) is None  # one client: nothing to split


def test_removal_set_and_low_mass() -> None:
    omega = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.7, 0.1, 0.2]])
    np.testing.assert_array_equal(removal_set(omega), [2])  # nobody weights cluster 2 highest
    gamma = np.array([[0.9, 0.08, 0.02], [0.5, 0.45, 0.05], [0.2, 0.78, 0.02]])
    np.testing.assert_array_equal(low_mass_clusters(gamma, 0.05), [2])  # S4 Alg. 3: mean γ < δ


# -- CFL ----------------------------------------------------------------------------------------------------
def _updates(directions: np.ndarray, groups: np.ndarray, scale: float, noise: float = 0.05) -> torch.Tensor:
    return torch.as_tensor(scale * (directions[groups] + noise * RNG.standard_normal((len(groups), 20))))


def test_cfl_rule_splits_conflicting_updates_only() -> None:
    e = np.eye(20)
    groups = np.array([0, 0, 0, 1, 1, 1])
    opposite = _updates(np.stack([e[0], -e[0]]), groups, 1.0)  # mean ≈ 0, each ‖Δθ‖ ≈ 1
    rule = CFLRule(tol1=0.4, tol2=0.8, warmup=2)
    mean_norm, max_norm = cfl_statistics(opposite)
    assert mean_norm < 0.4 and max_norm > 0.8
    splits, stats = rule.splits(2, [np.arange(6)], opposite, k=1)
    assert len(splits) == 1 and splits[0][0] == 0 and stats[0] == pytest.approx((mean_norm, max_norm))
    labels = splits[0][1]
    assert len(set(labels[:3])) == 1 and len(set(labels[3:])) == 1 and labels[0] != labels[3]
    assert rule.splits(1, [np.arange(6)], opposite, k=1)[0] == []  # warm-up
    aligned = _updates(np.stack([e[0], e[0]]), groups, 1.0)  # mean ≈ max: converged together, no split
    assert rule.splits(5, [np.arange(6)], aligned, k=1)[0] == []
    assert rule.splits(5, [np.arange(2)], opposite[[0, 3]], k=1)[0] == []  # clusters with ≤ 2 clients stay
    capped = CFLRule(tol1=0.4, tol2=0.8, warmup=0, max_clusters=2)
    both = [np.arange(6), np.arange(6, 12)]
    assert len(capped.splits(0, both, torch.cat([opposite, opposite]), k=1)[0]) == 1  # "CFL (2)"


def test_bipartition_is_complete_linkage_on_cosine_distance() -> None:
    d = _two_groups(2, 3)
    labels = bipartition(d)
    assert len(set(labels[:2])) == 1 and len(set(labels[2:])) == 1 and labels[0] != labels[2]
    np.testing.assert_array_equal(bipartition(np.zeros((1, 1))), [0])


# -- ICFL ---------------------------------------------------------------------------------------------------
def test_icfl_threshold_and_connectivity() -> None:
    eps2 = np.log(1 - 0.85) / (1 - np.log(4.0))
    assert icfl_threshold(0, 0.85, 4.0) == pytest.approx(0.0)
    assert icfl_threshold(7, 0.85, 4.0) == pytest.approx(1 - (np.e / 4.0) ** (7 / eps2))
    rising = [icfl_threshold(t, 0.85, 4.0) for t in range(0, 200, 10)]
    assert all(b > a for a, b in zip(rising[:-1], rising[1:], strict=True)) and rising[-1] < 1
    assert icfl_threshold(20, 0.98, 4.0) < icfl_threshold(20, 0.85, 4.0)  # larger α*(0): fewer splits
    same = cosine_similarity(np.ones((4, 5)))
    assert icfl_connectivity(same) == pytest.approx(1.0)
    e = np.eye(6)
    two = cosine_similarity(np.stack([e[0], e[0], e[0], e[1], e[1]]) + 0.01 * RNG.standard_normal((5, 6)))
    assert icfl_connectivity(two) < 0.7
    labels = icfl_bipartition(two)
    np.testing.assert_array_equal(labels, [0, 0, 0, 1, 1])


# -- StoCFL ---------------------------------------------------------------------------------------------------
def test_stocfl_merge_rule() -> None:
    e = np.eye(4)
    reps = np.stack([e[0], e[1], e[0] + 0.1 * e[1], e[2], e[1], np.zeros(4)])
    valid = np.array([True, True, True, True, True, False])
    assert stocfl_merges(reps, valid, 0.9) == [(0, [2]), (1, [4])]
    assert stocfl_merges(reps, valid, 0.999) == [(1, [4])]  # larger τ merges less (1 and 4 are identical)
    everything = stocfl_merges(reps, valid, -0.5)
    assert everything == [(0, [1, 2, 3, 4])]  # the invalid cluster (no representation yet) never merges


# -- PACFL --------------------------------------------------------------------------------------------------
def test_threshold_clusters() -> None:
    d = _two_groups(3, 2, far=10.0, near=2.0)
    np.testing.assert_array_equal(threshold_clusters(d, 5.0), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(threshold_clusters(d, 1.0), [0, 1, 2, 3, 4])  # nothing merges
    np.testing.assert_array_equal(threshold_clusters(d, 10.0), [0] * 5)  # merge while ≤ ν
    for link in ("average", "complete", "single"):
        assert threshold_clusters(d, 5.0, link).max() == 1


def test_server_statistics_follow_splits_and_removals() -> None:
    f_g = RNG.random((3, 4))  # F_g [K, C]
    f_latest = RNG.random((5, 3, 4))  # F^{latest} [M, K, C]
    grown = split_statistics(f_g, 1)
    np.testing.assert_array_equal(grown[3], f_g[1])  # Alg. 4 line 3
    np.testing.assert_array_equal(split_statistics(f_latest, 1, axis=1)[:, 3], f_latest[:, 1])  # line 4
    np.testing.assert_array_equal(remove_statistics(grown, [0, 2]), grown[[1, 3]])  # Alg. 5 lines 2–3
    np.testing.assert_array_equal(remove_statistics(f_latest, 1, axis=1), f_latest[:, [0, 2]])
