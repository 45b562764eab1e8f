"""Why HCFL+(FedEM) without SCWU ends hard (the s1-table7-scwu reading): the "w/o SCWU" re-assignment makes the
split rows one-hot and FedEM's E-step never brings a zero weight back; SCWU keeps every row soft."""

import numpy as np
import pytest

from fedcluster.tiers.cluster_book import hard_split_weights, split_weights
from fedcluster.tiers.weighting import soft_em


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hard_split_rows_stay_one_hot_under_em_and_scwu_rows_stay_soft(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, per, k = 6, 20, 3
    owner = np.repeat(np.arange(m), per)
    omega = rng.dirichlet(np.ones(k), size=m)
    omega[:, 0] += 1.0  # cluster 0 is every client's largest: the split takes all of them
    omega /= omega.sum(1, keepdims=True)
    second = np.zeros(m, dtype=bool)
    second[: m // 2] = True
    hard = hard_split_weights(omega, 0, second)
    soft = split_weights(omega, 0)
    for _ in range(5):  # rounds of E-steps with losses that favour other clusters now and then
        loglik = rng.normal(size=(m * per, k + 1)) * 3
        hard = soft_em(loglik, owner, hard).omega
        soft = soft_em(loglik, owner, soft).omega
    np.testing.assert_allclose(hard.max(1), 1.0, atol=1e-12)
    assert soft.max(1).max() < 0.999
