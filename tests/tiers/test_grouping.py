"""The pure parts of FL+HC, FedGroup, CLoVE (tiers/grouping.py) and FedGWC (tiers/gaussian_weighting.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from fedcluster.tiers.gaussian_weighting import (
    best_spectral_split,
    class_frequencies,
    gaussian_rewards,
    interaction_affinity,
    update_interaction,
    wasserstein_adjusted_score,
)
from fedcluster.tiers.grouping import (
    agglomerative_groups,
    decomposed_cosine,
    edc_distance,
    first_seen_order,
    inter_group_update,
    kmeans_groups,
    match_clusters_to_models,
    most_similar,
    silhouette_kmeans,
    update_directions,
)


def _blobs(rng: np.random.Generator, centers: np.ndarray, per: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    truth = np.repeat(np.arange(len(centers)), per)
    return centers[truth] + noise * rng.standard_normal((len(truth), centers.shape[1])), truth


def test_first_seen_order() -> None:
    np.testing.assert_array_equal(first_seen_order(np.array([5, 5, 2, 9, 2])), [0, 0, 1, 2, 1])


# -- FL+HC -------------------------------------------------------------------------------------------------
def test_agglomerative_groups_cut_by_threshold_or_count() -> None:
    rng = np.random.default_rng(0)
    x, truth = _blobs(rng, np.array([[0.0] * 5, [3.0] * 5, [-3.0] * 5]), 6, 0.1)
    assert adjusted_rand_score(truth, agglomerative_groups(x, distance_threshold=2.0)) == 1.0
    assert len(np.unique(agglomerative_groups(x, distance_threshold=100.0))) == 1  # above every merge: one group
    assert len(np.unique(agglomerative_groups(x, distance_threshold=1e-6))) == len(x)  # below every merge
    assert adjusted_rand_score(truth, agglomerative_groups(x, "average", "cosine", n_clusters=3)) < 1.0  # 0 ∥ 3
    assert adjusted_rand_score(truth, agglomerative_groups(x, "complete", "manhattan", n_clusters=3)) == 1.0


def test_agglomerative_groups_rejects_bad_choices() -> None:
    x = np.ones((4, 2))
    with pytest.raises(ValueError, match="exactly one"):
        agglomerative_groups(x, distance_threshold=1.0, n_clusters=2)
    with pytest.raises(ValueError, match="ward"):
        agglomerative_groups(x, "ward", "cosine", n_clusters=2)


# -- FedGroup ----------------------------------------------------------------------------------------------
def test_edc_groups_updates_by_direction_not_size() -> None:
    """Updates along three directions with very different norms: EDC (cosines to the SVD directions) groups them
    by direction; Euclidean k-means on the raw updates groups them by size."""
    rng = np.random.default_rng(1)
    dirs = np.linalg.qr(rng.standard_normal((200, 3)))[0].T  # 3 orthonormal directions in R^200
    truth = np.tile(np.arange(3), 8)
    scale = np.repeat([0.1, 1.0, 10.0], 8)
    updates = scale[:, None] * (dirs[truth] + 0.05 * rng.standard_normal((24, 200)))
    v = update_directions(updates, 3)
    assert v.shape == (3, 200)
    m = decomposed_cosine(updates, v)
    assert m.shape == (24, 3) and np.all(np.abs(m) <= 1 + 1e-9)
    assert adjusted_rand_score(truth, kmeans_groups(m, 3, seed=0)) == 1.0
    assert adjusted_rand_score(truth, kmeans_groups(updates, 3, seed=0)) < 0.5
    d = edc_distance(m)
    np.testing.assert_allclose(d, d.T)
    np.testing.assert_allclose(np.diag(d), 0)
    assert d[truth[:, None] == truth[None, :]].max() < d[truth[:, None] != truth[None, :]].min()


def test_newcomer_joins_the_closest_direction() -> None:
    refs = np.eye(3)
    new = np.array([[0.1, 2.0, 0.0], [-1.0, 0.0, 0.2], [0.0, 0.1, 5.0]])
    np.testing.assert_array_equal(most_similar(new, refs), [1, 2, 2])  # cosine, not distance: -e0 is far from e0


def test_inter_group_update() -> None:
    theta = np.array([[3.0, 4.0], [0.0, 1.0]])  # norms 5 and 1
    np.testing.assert_array_equal(inter_group_update(theta, 0.0), theta)
    out = inter_group_update(theta, 0.5)
    # group 0: (θ0 + 0.5 θ1 / 1) / (1 + 0.5);  group 1: (θ1 + 0.5 θ0 / 5) / (1 + 0.1)
    np.testing.assert_allclose(out[0], (theta[0] + 0.5 * theta[1]) / 1.5)
    np.testing.assert_allclose(out[1], (theta[1] + 0.1 * theta[0]) / 1.1)
    assert np.linalg.norm(out[0] - out[1]) < np.linalg.norm(theta[0] - theta[1])


# -- CLoVE -------------------------------------------------------------------------------------------------
def test_silhouette_kmeans_picks_the_number_of_clusters() -> None:
    rng = np.random.default_rng(2)
    for k in (2, 3, 5):
        x, truth = _blobs(rng, 4.0 * rng.standard_normal((k, 4)), 5, 0.05)
        labels = silhouette_kmeans(x, k_max=6, seed=0)
        assert len(np.unique(labels)) == k and adjusted_rand_score(truth, labels) == 1.0
    assert (silhouette_kmeans(np.ones((5, 3)), 4, 0) == 0).all()
    assert (silhouette_kmeans(np.eye(2), 4, 0) == 0).all()  # too few rows for a silhouette


def test_matching_minimises_the_total_cost() -> None:
    cost = np.array([[5.0, 1.0, 9.0], [2.0, 1.5, 9.0]])  # greedy would give both model 1
    np.testing.assert_array_equal(match_clusters_to_models(cost), [1, 0])
    with pytest.raises(ValueError, match="cannot be matched"):
        match_clusters_to_models(np.ones((3, 2)))


# -- FedGWC ------------------------------------------------------------------------------------------------
def test_gaussian_rewards_punish_the_outlying_trajectory() -> None:
    losses = np.array([[1.0, 0.5], [1.1, 0.55], [0.9, 0.45], [3.0, 2.0]])
    r = gaussian_rewards(losses, np.ones(4))
    assert r.argmin() == 3 and np.all((r > 0) & (r <= 1))
    np.testing.assert_allclose(gaussian_rewards(np.ones((3, 2)), np.ones(3)), 1.0)  # all equal: reward 1
    # the weights move μ: the heavy client is the reference
    heavy = gaussian_rewards(losses[[0, 3]], np.array([1.0, 100.0]))
    assert heavy[1] > heavy[0]
    drawn = gaussian_rewards(losses, np.ones(4), sampling_size=10, rng=np.random.default_rng(0))
    assert drawn.argmin() == 3
    with pytest.raises(ValueError, match="rng"):
        gaussian_rewards(losses, np.ones(4), sampling_size=10)


def test_update_interaction_moves_only_the_sampled_block() -> None:
    p = np.full((4, 4), 1 / 16)
    out, change = update_interaction(p, np.array([0, 2]), np.array([3.0, 1.0]), alpha=0.5)
    np.testing.assert_allclose(out[0, [0, 2]], 0.5 / 16 + 0.5 * 0.75)
    np.testing.assert_allclose(out[2, [0, 2]], 0.5 / 16 + 0.5 * 0.25)
    np.testing.assert_array_equal(out[[1, 3]], p[[1, 3]])
    np.testing.assert_array_equal(out[:, [1, 3]], p[:, [1, 3]])
    assert change == pytest.approx(((out - p) ** 2).sum() / 4)


def test_interaction_affinity_leaves_out_the_pair_and_is_symmetric() -> None:
    p = np.array([[0.0, 9.0, 1.0, 1.0], [9.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    w = interaction_affinity(p, beta=5.0)
    np.testing.assert_allclose(w, w.T)
    np.testing.assert_allclose(np.diag(w), 0.0)
    assert w[0, 1] == pytest.approx(1.0)  # rows 0, 1 differ only at entries 0 and 1, which are left out
    assert w[2, 3] == pytest.approx(1.0) and w[0, 2] < 0.1
    asym = np.array([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert not np.allclose(interaction_affinity(asym, 1.0, "row"), interaction_affinity(asym, 1.0, "column"))


def test_best_spectral_split_finds_blocks_and_refuses_noise() -> None:
    truth = np.repeat([0, 1], 6)
    block = np.where(truth[:, None] == truth[None, :], 1.0, 0.01)
    np.fill_diagonal(block, 0.0)
    labels = best_spectral_split(block, max_clusters=4, seed=0)
    assert labels is not None and adjusted_rand_score(truth, labels) == 1.0
    uniform = np.ones((12, 12)) - np.eye(12)
    assert best_spectral_split(uniform, max_clusters=4, seed=0) is None


def test_wasserstein_adjusted_score_sees_imbalance_not_class_names() -> None:
    balanced = np.full((4, 4), 0.25)
    skewed = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7]])
    freqs = np.concatenate([balanced, skewed])
    by_shape = np.repeat([0, 1], 4)
    mixed = np.tile([0, 1], 4)
    assert wasserstein_adjusted_score(freqs, by_shape) == pytest.approx(1.0)  # sorted rows are identical per group
    assert wasserstein_adjusted_score(freqs, mixed) < 0
    assert wasserstein_adjusted_score(freqs, by_shape, "davies-bouldin") < wasserstein_adjusted_score(
        freqs + np.random.default_rng(0).uniform(0, 0.05, freqs.shape), mixed, "davies-bouldin")
    assert np.isnan(wasserstein_adjusted_score(freqs, np.zeros(8)))
    f = class_frequencies(np.array([0, 0, 1, 2]), np.array([0, 0, 0, 2]), 3, 3)
    np.testing.assert_allclose(f, [[2 / 3, 1 / 3, 0], [0, 0, 0], [0, 0, 1]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ward_silhouette_search_takes_a_larger_k_only_by_a_clear_margin(seed: int) -> None:
    """CLoVE's unknown-K search (the authors' code): Ward + silhouette, a larger k only when its silhouette beats
    the best so far by 10 %. A group with two close sub-blobs (silhouette 0.79–0.81 for k = 2, 0.83–0.85 for
    k = 3) stays one cluster; three well separated groups give k = 3."""
    from fedcluster.tiers.grouping import ward_silhouette_k

    rng = np.random.default_rng(seed)

    def blobs(gap: float) -> np.ndarray:
        centres = [[0, 0, 0]] * 8 + [[10, 0, 0]] * 4 + [[10, gap, 0]] * 4
        return np.asarray(centres, dtype=float) + 0.5 * rng.standard_normal((16, 3))

    assert ward_silhouette_k(blobs(5.0), 4) == 2
    assert ward_silhouette_k(blobs(10.0), 4) == 3
    assert ward_silhouette_k(np.ones((6, 3)), 4) == 1
