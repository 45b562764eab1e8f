"""CFL-GP (S3): profile accumulation, spectral clustering, matching, and ARI 1 on the three-lines task."""

from __future__ import annotations

import csv

import numpy as np

from fedcluster.algorithms.spectral import choose_k, cumulative_beta, match_clusters, spectral_clustering
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.sources.synthetic import cflgp_lines
from fedcluster.engine.runner import Run


def test_beta_keeps_the_cumulative_average() -> None:
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((6, 4))
    g = np.zeros(4)
    for n, x in enumerate(grads):
        b = cumulative_beta(n)
        g = (1 - b) * g + b * x
        np.testing.assert_allclose(g, grads[: n + 1].mean(0))


def test_hungarian_matching_keeps_most_clients_on_their_model() -> None:
    current = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    labels = np.array([2, 2, 1, 0, 0, 0, 1, 1, 1, 2])  # label permutation of current, with two changes
    new = match_clusters(labels, current, 3)
    assert (new == current).sum() == 8  # the best of the 3! permutations
    best = max(sum(np.array(p)[labels] == current) for p in __import__("itertools").permutations(range(3)))
    assert (new == current).sum() == best


def test_spectral_clustering_separates_profiles_and_choose_k_finds_k() -> None:
    rng = np.random.default_rng(1)
    centers = rng.standard_normal((3, 40)) * 3
    true = np.repeat(np.arange(3), 8)
    prof = centers[true] + 0.3 * rng.standard_normal((24, 40))
    current = rng.integers(0, 3, 24)
    new = spectral_clustering(prof, current, 3)
    assert all(len(np.unique(new[true == g])) == 1 for g in range(3)) and len(np.unique(new)) == 3
    assert choose_k(prof, k_max=6)["k"] == 3


def _run(tmp_path, fed, rounds: int, *extra: str) -> list[dict]:
    out = tmp_path / "run"
    cfg, typed = resolve(load_raw(None, [
        "algorithm=cflgp", "algorithm.num_clusters=3", "scenario=cflgp-lines", "dataset=cflgp-lines",
        "model=linear", f"rounds={rounds}", "batch_size=10", "lr=0.1", "progress=false", f"out={out}",
        f"num_clients={fed.num_clients}", f"clients_per_round={fed.num_clients}", "threads=1",
        "checkpoint_every=1000", *extra]))
    Run(cfg, typed, fed=fed).execute()
    return list(csv.DictReader(open(out / "rounds.csv")))


def test_cflgp_reaches_ari_one_on_three_lines(tmp_path) -> None:
    assign = np.random.default_rng(0).permutation(np.arange(12) % 3).tolist()
    fed = cflgp_lines(12, 20.0, 10, assignment=assign, seed=0)
    rows = _run(tmp_path, fed, 40)
    assert float(rows[-1]["ari"]) == 1.0
    assert float(rows[-1]["first_ari1_round"]) <= 20
    assert float(rows[-1]["mse"]) < 0.06  # noise variance 0.04 is the optimum
    # S3 Table 5: per P = 2 rounds a client gets < P + 1 models
    down = sum(float(r["models_down"]) for r in rows[:20])
    assert down < 20 / 2 * 3 * 12


def test_model_averaging_variant_with_compressed_profiles(tmp_path) -> None:
    assign = np.random.default_rng(1).permutation(np.arange(12) % 3).tolist()
    fed = cflgp_lines(12, 20.0, 10, pool_size=50, assignment=assign, seed=1)  # one local epoch = 5 steps
    rows = _run(tmp_path, fed, 30, "algorithm.variant=model", "algorithm.compression=random",
                "algorithm.compression_ratio=2")
    assert float(rows[-1]["ari"]) == 1.0


def test_the_kept_gram_matrix_is_the_profiles_gram_matrix(tmp_path) -> None:
    """CFL-GP clusters on the profiles' Gram matrix, kept block by block as profiles change (partial participation
    included): it must equal the Gram matrix of the profiles themselves, and be rebuilt from a checkpoint."""
    fed = cflgp_lines(12, 20.0, 10, seed=0)
    cfg, typed = resolve(load_raw(None, [
        "algorithm=cflgp", "algorithm.num_clusters=3", "scenario=cflgp-lines", "dataset=cflgp-lines", "model=linear",
        "rounds=30", "batch_size=10", "lr=0.1", "progress=false", f"out={tmp_path / 'run'}", "num_clients=12",
        "clients_per_round=5", "threads=1", "checkpoint_every=1000"]))
    run = Run(cfg, typed, fed=fed)
    run.execute()
    alg = run.alg
    g = alg.profiles.reshape(len(alg.profiles), -1)
    assert np.abs(g).sum() > 0
    np.testing.assert_allclose(alg.grams.sum(0), g @ g.T, rtol=1e-10, atol=1e-12)
    state = alg.state_dict()
    alg.grams = np.zeros_like(alg.grams)
    alg.load_state_dict(state)
    np.testing.assert_allclose(alg.grams.sum(0), g @ g.T, rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(0)
    current = rng.integers(0, 3, 12)
    np.testing.assert_array_equal(spectral_clustering(g @ g.T, current, 3, gram=True),
                                  spectral_clustering(g, current, 3))
