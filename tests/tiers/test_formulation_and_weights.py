"""Tier 1 (formulation) and tier 2 (weights) against their closed forms and definitions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.tiers.formulation import (
    GaussianStats,
    gaussian_log_density,
    label_counts,
    label_marginal,
    log_likelihood,
)
from fedcluster.tiers.weighting import adam_em, best_cluster, em_weights, fedsoft, hard_distance, hard_loss, soft_em

RNG = np.random.default_rng(0)


def _cohort(n_per=(5, 3, 7), k=3):
    owner = np.repeat(np.arange(len(n_per)), n_per)
    losses = RNG.exponential(1.0, (len(owner), k))
    return owner, losses


def test_em_step_equals_closed_form() -> None:
    owner, losses = _cohort()
    prior = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [1 / 3, 1 / 3, 1 / 3]])
    est = soft_em(-losses, owner, prior)
    for j, i in enumerate(owner):
        num = prior[i] * np.exp(-losses[j])  # γ_{i,j;k} = ω_{i;k} L_k / Σ_n ω_{i;n} L_n  (S4 eq. 3)
        np.testing.assert_allclose(est.gamma[j], num / num.sum(), rtol=1e-12)
    for i in range(3):
        np.testing.assert_allclose(est.omega[i], est.gamma[owner == i].mean(0), rtol=1e-12)


def test_sample_scope_is_hcfl_plus_eq_4_5() -> None:
    owner, losses = _cohort()
    client = np.full((3, 3), 1 / 3)
    sample = RNG.dirichlet(np.ones(3), len(owner))
    mu = 0.4
    est = soft_em(-losses, owner, client, sample, mu)
    gamma = sample * np.exp(-losses)
    gamma /= gamma.sum(1, keepdims=True)
    tilde = client[owner] * np.exp(-losses)
    tilde /= tilde.sum(1, keepdims=True)
    omega = np.stack([tilde[owner == i].mean(0) for i in range(3)])
    np.testing.assert_allclose(est.gamma, gamma, rtol=1e-12)
    np.testing.assert_allclose(est.omega, omega, rtol=1e-12)
    np.testing.assert_allclose(est.sample_prior, mu * gamma + (1 - mu) * omega[owner], rtol=1e-12)
    # μ̃ = 0 with a client-wise sample prior is the client-wise E-step
    flat = soft_em(-losses, owner, client, client[owner], 0.0)
    np.testing.assert_allclose(flat.gamma, soft_em(-losses, owner, client).gamma, rtol=1e-12)


def _on_simplex(w: np.ndarray) -> None:
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(1), 1.0, rtol=1e-9)


def test_weights_stay_on_the_simplex() -> None:
    owner, losses = _cohort((40, 1, 13), k=4)
    losses[:, 2] += 800.0  # extreme values must not produce NaN
    prior = RNG.dirichlet(np.ones(4), 3)
    prior[0, 1] = 0.0
    est = soft_em(-losses, owner, prior / prior.sum(1, keepdims=True), RNG.dirichlet(np.ones(4), len(owner)), 0.3)
    for w in (est.gamma, est.omega, est.sample_prior, hard_loss(-losses, owner, 3),
              hard_loss(-losses, owner, 3, "sample"), fedsoft(-losses, owner, 3, 0.01),
              em_weights(-losses, owner, 3, 5), hard_distance(RNG.random((3, 4)))):
        _on_simplex(w)
    g_prev = RNG.dirichlet(np.ones(4), len(owner))
    gamma, m1, m2 = adam_em(g_prev, est.gamma, np.zeros_like(g_prev), np.zeros_like(g_prev), 1.0, 0.9, 0.99, 1e-8)
    _on_simplex(gamma)


def test_hard_rules_pick_the_lowest_loss_and_distance() -> None:
    owner = np.array([0, 0, 1, 1])
    losses = np.array([[1.0, 0.2], [0.9, 0.3], [0.1, 2.0], [3.0, 0.5]])
    np.testing.assert_array_equal(best_cluster(-losses, owner, 2), [1, 1])  # client 1: mean losses 1.55 vs 1.25
    np.testing.assert_array_equal(hard_loss(-losses, owner, 2, "sample").argmax(1), [1, 1, 0, 1])
    np.testing.assert_array_equal(hard_distance(np.array([[3.0, 1.0], [0.5, 2.0]])).argmax(1), [1, 0])


def test_fedsoft_shares_and_floor() -> None:
    owner = np.zeros(4, dtype=np.int64)
    losses = np.array([[0.1, 1.0, 1.0], [0.1, 1.0, 1.0], [0.1, 1.0, 1.0], [1.0, 0.1, 1.0]])
    u = fedsoft(-losses, owner, 1, 0.1)
    expected = np.array([0.75, 0.25, 0.1])
    np.testing.assert_allclose(u[0], expected / expected.sum())


def test_adam_first_step_matches_app_h3() -> None:
    prev = np.array([[0.5, 0.5]])
    hat = np.array([[0.9, 0.1]])
    gamma, m1, m2 = adam_em(prev, hat, np.zeros((1, 2)), np.zeros((1, 2)), 0.1, 0.9, 0.99, 1e-8)
    g = prev - hat
    step = 0.1 * ((0.1 * g) / 0.1) / (np.sqrt(0.01 * g**2 / 0.01) + 1e-8)  # ≈ 0.1·sign(g)
    raw = prev - step
    np.testing.assert_allclose(gamma, raw / raw.sum(), rtol=1e-9)
    np.testing.assert_allclose(m1, 0.1 * g)


def test_label_marginal_equals_its_definition() -> None:
    n, k, c = 50, 3, 4
    gamma = RNG.dirichlet(np.ones(k), n)
    y = RNG.integers(0, c, n)
    counts = label_counts(gamma, y, c)
    marginal = label_marginal(counts)
    for kk in range(k):
        for yy in range(c):
            # C_{y,k} = Σ_j 1{y_j = y} γ_{j;k} / Σ_j γ_{j;k}  (S4 eq. 2)
            assert counts[kk, yy] == pytest.approx(gamma[y == yy, kk].sum())
            assert marginal[kk, yy] == pytest.approx(gamma[y == yy, kk].sum() / gamma[:, kk].sum())
    losses = RNG.exponential(1.0, (n, k))
    ll = log_likelihood(losses, "fedrc-ratio", y, marginal)
    np.testing.assert_allclose(ll, -losses - np.log(marginal[:, y].T))
    np.testing.assert_allclose(label_marginal(np.zeros((2, 4))), 0.25)  # no statistics yet: uniform


def test_gaussian_density_of_the_joint_formulation() -> None:
    x = torch.as_tensor(RNG.normal(size=(30, 1, 2, 3)), dtype=torch.float32)
    gamma = RNG.dirichlet(np.ones(2), 30)
    stats = GaussianStats.of(x, gamma)
    dens = gaussian_log_density(x, stats, var_floor=1e-6)
    flat = x.reshape(30, -1).double().numpy()
    for k in range(2):
        w = gamma[:, k] / gamma[:, k].sum()
        mu = w @ flat
        var = w @ (flat - mu) ** 2
        ref = -0.5 * (((flat - mu) ** 2 / var).sum(1) + np.log(var).sum() + 6 * np.log(2 * np.pi))
        np.testing.assert_allclose(dens[:, k], ref, rtol=1e-6)
    ll = log_likelihood(np.ones((30, 2)), "joint", log_px=dens)
    np.testing.assert_allclose(ll, dens - 1.0)


def test_per_client_sums_equal_the_row_by_row_reference() -> None:
    """The cohort-wide forms (clusters.jsonl masses by column, FedEM's per-client rows by one sort) add the same
    numbers in the same order as the row-by-row np.add.at and ``owner == i`` they replace: equal to the bit."""
    from fedcluster.tiers.cluster_state import cluster_mass
    from fedcluster.tiers.cohort import Cohort

    rng = np.random.default_rng(0)
    gamma = (rng.random((5000, 3)) * 10.0 ** rng.uniform(-8, 3, (5000, 1))).astype(np.float32)
    groups = rng.integers(0, 7, 5000)
    ref = np.zeros((7, 3))
    np.add.at(ref, groups, gamma)
    assert np.array_equal(cluster_mass(gamma, groups, 7), ref.T)
    owner = rng.permutation(np.repeat(np.arange(40), rng.integers(0, 9, 40)))  # not sorted, some clients empty
    found = Cohort(np.arange(41), np.arange(len(owner)), owner, np.ones(41), np.zeros(len(owner))).own_rows()
    assert len(found) == 41 and all(np.array_equal(f, np.flatnonzero(owner == i)) for i, f in enumerate(found))
