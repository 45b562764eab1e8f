"""FedMD + FedX+clustering (S2) step by step, and its global-convergence behaviour on mixed regression."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from fedcluster.algorithms.fedmd import (
    client_sums,
    default_num_anchors,
    group_anchors,
    pair_moment,
    top_left_singular,
    top_symmetric,
)
from fedcluster.algorithms.spectral import orthogonal_iteration
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.sources.synthetic import mixed_regression
from fedcluster.engine.runner import Run
from fedcluster.metrics.regression import bottleneck_permutation, param_error


def test_orthogonal_iteration_recovers_top_subspace() -> None:
    rng = np.random.default_rng(0)
    d, k = 30, 3
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    y = basis @ np.diag([10.0, 8.0, 6.0] + [0.5] * (d - 3)) @ basis.T
    rows = rng.standard_normal((5, d, d)) * 0.0 + y / 5  # Y = Σ_i Y_i, five clients
    q = orthogonal_iteration(lambda m: sum(r @ m for r in rows), lambda m: sum(r.T @ m for r in rows),
                             d, k, 20, rng)
    top = basis[:, :3]
    # principal angles: the projection of the true top space onto span(Q) keeps all its energy
    assert np.linalg.norm(q.T @ top) ** 2 > k - 1e-6
    np.testing.assert_allclose(q.T @ q, np.eye(k), atol=1e-10)


def test_pair_moment_is_the_all_pairs_u_statistic() -> None:
    rng = np.random.default_rng(1)
    e = rng.standard_normal((7, 4))
    owner = np.array([0, 0, 0, 1, 1, 1, 1])
    s, ee = pair_moment(e, owner, 2)
    y = s.T @ s - ee.T @ ee
    expect = np.zeros((4, 4))
    for c in (0, 1):
        rows = e[owner == c]
        n = len(rows)
        expect += sum(np.outer(rows[i], rows[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1)) / 2
    np.testing.assert_allclose(y, expect, atol=1e-12)


def test_client_sums_add_each_clients_rows_in_order_like_add_at() -> None:
    rng = np.random.default_rng(4)
    for _ in range(30):
        n, d, m = int(rng.integers(0, 200)), int(rng.integers(1, 8)), int(rng.integers(1, 20))
        owner = rng.integers(0, m, n)  # unsorted, some clients without rows
        e = rng.standard_normal((n, d)) * 10.0 ** rng.uniform(-6, 6, (n, 1))  # sums that depend on the order
        expect = np.zeros((m, d))
        np.add.at(expect, owner, e)
        np.testing.assert_array_equal(client_sums(e, owner, m), expect)  # bit for bit


def _planted(rng: np.random.Generator, rows: int, d: int, k: int) -> np.ndarray:
    """Rows that put k well-separated singular values into Y = Σ_r ± a_r a_r^T."""
    basis, _ = np.linalg.qr(rng.standard_normal((d, k)))
    signal = rng.standard_normal((rows, k)) * np.array([8.0, 6.0, 4.0][:k]) @ basis.T
    return signal + 0.1 * rng.standard_normal((rows, d))


@pytest.mark.parametrize("rows,d", [(40, 120), (300, 60)], ids=["fewer-rows-than-dims", "more-rows"])
def test_subspace_solvers_span_the_top_singular_space_of_y(rows: int, d: int) -> None:
    rng = np.random.default_rng(5)
    k = 3
    pos, neg = _planted(rng, rows, d, k), 1.1 * _planted(rng, rows // 2, d, 1)  # Y's top 3 include a λ < 0
    y_sym = pos.T @ pos - neg.T @ neg
    a, b = pos, pos + 0.05 * rng.standard_normal(pos.shape)
    for u, y in ((top_symmetric(pos, neg, k), y_sym), (top_left_singular(a, b, k), a.T @ b)):
        ref = np.linalg.svd(y)[0][:, :k]
        assert u.shape == (d, k)
        np.testing.assert_allclose(u.T @ u, np.eye(k), atol=1e-10)
        np.testing.assert_allclose(u @ u.T, ref @ ref.T, atol=1e-9)  # the same subspace


def test_anchor_grouping_by_half_separation() -> None:
    rng = np.random.default_rng(2)
    centers = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    true = np.array([0, 0, 1, 1, 1, 2, 2, 0])
    est = centers[true] + 0.05 * rng.standard_normal((8, 2))
    labels = group_anchors(est, radius=1.5, k=3)
    assert len(np.unique(labels)) == 3
    assert all(len(np.unique(labels[true == g])) == 1 for g in range(3))
    assert default_num_anchors(3) == 10  # ⌈3·3·ln 3⌉


def test_param_error_is_min_over_permutations_of_max_distance() -> None:
    star = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    hat = star[[2, 0, 1]] + np.array([[0.1, 0.0], [0.0, 0.2], [0.0, 0.0]])
    assert param_error(hat, star) == pytest.approx(0.2)
    cost = np.random.default_rng(3).random((9, 9))  # k > 7: threshold search agrees with brute force bound
    perm, val = bottleneck_permutation(cost)
    assert sorted(perm.tolist()) == list(range(9)) and cost[perm, np.arange(9)].max() == pytest.approx(val)
    assert val <= min(cost[np.random.default_rng(s).permutation(9), np.arange(9)].max() for s in range(200))


def _errors(tmp_path, fed, init: str, rounds: int, lr: float, seed: int = 0) -> np.ndarray:
    out = tmp_path / init
    cfg, typed = resolve(load_raw(None, [
        "algorithm=fedmd", f"algorithm.init={init}", "algorithm.num_clusters=3", "scenario=mixed-regression",
        "dataset=mixed-regression", "model=linear-nobias", f"rounds={rounds}", f"lr={lr}", "progress=false",
        f"out={out}", f"num_clients={fed.num_clients}", f"clients_per_round={fed.num_clients}", "threads=1",
        f"seed={seed}", "checkpoint_every=1000"]))
    Run(cfg, typed, fed=fed).execute()
    return np.array([float(r["param_error"]) for r in csv.DictReader(open(out / "rounds.csv"))])


def test_two_phase_reaches_oracle_error_while_ifca_from_random_start_stalls(tmp_path) -> None:
    fed = mixed_regression(3, 20, "20x60", seed=0)
    ours = _errors(tmp_path, fed, "fedmd", 45, 0.05)
    oracle = _errors(tmp_path, fed, "oracle", 45, 0.05)
    ifca = _errors(tmp_path, fed, "random", 45, 0.05)
    assert ours[4] < 0.5 * ifca[0]  # Phase 1 moves the anchors towards θ* from the random start
    assert ours[-1] < 1.5 * oracle[-1]  # two-phase ends at the oracle's error ...
    assert ifca[-1] > 10 * oracle[-1]  # ... IFCA from the same kind of random start sits on a floor


@pytest.mark.parametrize("args", [["model=mlp", "dataset=mixed-regression", "scenario=mixed-regression"],
                                  ["model=linear"]])
def test_one_shot_start_on_a_model_it_cannot_fit_is_refused_in_one_line(tmp_path, capsys, args) -> None:
    """One-shot clustering fits a least-squares model per client: a non-linear model or a classification task
    gets one line naming the problem and the fix (exit 2), not a traceback."""
    from fedcluster.app.cli import main

    code = main(["run", "algorithm=fedmd", "algorithm.init=oneshot", "num_clients=6", "rounds=1", "progress=false",
                 *args, f"out={tmp_path / 'run'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "algorithm.init=oneshot" in err[0] and "Traceback" not in err[0]
