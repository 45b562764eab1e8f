"""S2 (FedMD) review checks: one-shot baseline averaging, the moment step's sign and clamp, pairs=one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.sources.synthetic import mixed_regression
from fedcluster.engine.runner import Run


def _run(tmp_path: Path, fed, *extra: str) -> Run:
    cfg, typed = resolve(load_raw(None, [
        "algorithm=fedmd", "algorithm.num_clusters=3", "scenario=mixed-regression", "dataset=mixed-regression",
        "model=linear-nobias", "progress=false", f"out={tmp_path}", f"num_clients={fed.num_clients}",
        f"clients_per_round={fed.num_clients}", "threads=1", "checkpoint_every=1000", *extra]))
    return Run(cfg, typed, fed=fed)


def test_one_shot_baseline_averages_within_its_clusters(tmp_path: Path) -> None:
    """One-shot clustering then FedAvg per fixed cluster: block ℓ moves by its members' N_i-weighted mean
    update, not by N_ℓ/N of it (S2's all-client rule, kept for the other inits)."""
    for seed in range(2):
        fed = mixed_regression(3, 10, "50x30", seed=seed)
        run = _run(tmp_path / f"a{seed}", fed, "algorithm.init=oneshot", "rounds=1", "lr=0.05", f"seed={seed}")
        before = {n: v.clone() for n, v in run.alg.models.items()}
        run.alg.run_round(0, np.arange(fed.num_clients))
        z = run.alg.fixed
        local = run.ctx.trainer.train({n: v[z] for n, v in before.items()}, np.arange(fed.num_clients),
                                      run.alg.local_solver(), 0)
        sizes = fed.train.sizes.astype(np.float64)
        for ell in range(3):
            m = z == ell
            expected = (local["head.weight"][m].double().cpu().numpy() * sizes[m, None, None]).sum(0) / sizes[m].sum()
            np.testing.assert_allclose(run.alg.models["head.weight"][ell].cpu().numpy(), expected, rtol=1e-4,
                                       atol=1e-5)


def test_moment_step_moves_along_the_mean_residual_and_clamps(tmp_path: Path) -> None:
    """S2 Alg. 1 lines 9–14: r = Ũβ̂ points along the anchor's mean residual (E.2.3), and σ̂² = max(β̂ᵀAβ̂, 0)
    freezes the anchor when the quadratic form is negative (no square root of a negative number)."""
    fed = mixed_regression(3, 6, "10x30", seed=0)
    alg = _run(tmp_path, fed, "rounds=1").alg
    rng = np.random.default_rng(0)
    direction = rng.standard_normal(6)
    u = np.linalg.qr(direction[:, None])[0]
    theta = np.zeros(6)
    for sign in (1.0, -1.0):
        e = sign * direction[None] * rng.uniform(0.5, 1.5, (10, 1))  # residuals all along ±direction
        new, moved = alg.moment_step(theta, u, e)
        assert moved and (new - theta) @ e.mean(0) > 0
    e = np.stack([direction, -direction])  # Σ_pairs = −v vᵀ: negative form
    new, moved = alg.moment_step(theta, u, e)
    assert not moved and np.array_equal(new, theta) and np.isfinite(new).all()


def test_pairs_one_uses_one_pair_per_client(tmp_path: Path) -> None:
    """pairs=one (S2 literally): Y = mean_c ε_j ε_j'ᵀ of one pair per client; with two identical residuals per
    client that is mean_c v_c v_cᵀ, whose top-k eigenvectors Ũ must span."""
    fed = mixed_regression(3, 6, "2x40", seed=1)
    alg = _run(tmp_path, fed, "rounds=1", "algorithm.pairs=one").alg
    rng = np.random.default_rng(1)
    basis = np.linalg.qr(rng.standard_normal((6, 3)))[0]
    v = rng.standard_normal((40, 3)) * [3.0, 2.0, 1.0] @ basis.T
    e = np.repeat(v, 2, axis=0)
    owner = np.repeat(np.arange(40), 2)
    u = alg.subspace(e, owner, 40, 0)
    vals, vecs = np.linalg.eigh(v.T @ v / 40)
    top = vecs[:, np.argsort(vals)[::-1][:3]]
    np.testing.assert_allclose(np.linalg.svd(u.T @ top, compute_uv=False), 1.0, atol=1e-8)
