"""Synthetic federations: S2's mixed linear regression and S3's three lines."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.data.federation import Federation
from fedcluster.data.sources.synthetic import (
    cflgp_lines,
    format_sizes,
    mixed_regression,
    mixed_regression_config,
    parse_sizes,
)


def lstsq(x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Least-squares fit (torch's LAPACK call is far faster than numpy's on this machine)."""
    return torch.linalg.lstsq(x.double(), y.double()[:, None]).solution[:, 0].numpy()


def same(a: Federation, b: Federation) -> bool:
    return all(
        torch.equal(getattr(a, s).x, getattr(b, s).x) and torch.equal(getattr(a, s).y, getattr(b, s).y)
        for s in ("train", "val", "test")
    ) and np.array_equal(a.true_cluster, b.true_cluster)


# -- sizes -------------------------------------------------------------------------------------
def test_parse_sizes() -> None:
    assert parse_sizes("10x900+50x20") == [10] * 900 + [50] * 20
    assert parse_sizes("10×3 + 5 X 2") == [10, 10, 10, 5, 5]
    assert parse_sizes([3, 4]) == [3, 4]
    assert parse_sizes(np.array([2, 2])) == [2, 2]
    assert format_sizes(parse_sizes("10x900+50x20")) == "10x900+50x20"
    for bad in ("10x", "ten x 3", "-5x10", "10x0", "", [3, -1], [], [2.5]):
        with pytest.raises(ValueError):
            parse_sizes(bad)  # type: ignore[arg-type]


# -- S2 mixed regression -----------------------------------------------------------------------
def test_mixed_regression_shapes_and_metadata() -> None:
    fed = mixed_regression(k=3, d=20, sizes="5x30+40x4", p=[0.2, 0.3, 0.5], test_size=100, seed=3)
    assert fed.task == "regression" and fed.num_classes == 0 and fed.num_clients == 34
    assert fed.train.x.dtype == torch.float32 and fed.train.y.dtype == torch.float32
    assert fed.train.x.shape == (5 * 30 + 40 * 4, 20) and fed.train.y.shape == (310,)
    np.testing.assert_array_equal(fed.train.sizes, [5] * 30 + [40] * 4)
    np.testing.assert_array_equal(fed.val.sizes, [10] * 34)  # max(10, 20% of n_i)
    np.testing.assert_array_equal(fed.test.sizes, [100] * 3)
    np.testing.assert_array_equal(fed.test_cluster, [0, 1, 2])
    assert fed.true_cluster.shape == (34,) and set(fed.true_cluster) <= {0, 1, 2}
    assert fed.extras["theta_star"].shape == (3, 20)
    assert fed.info["name"] == "mixed_regression" and fed.info["sizes"] == "5x30+40x4"
    assert fed.info["p"] == pytest.approx([0.2, 0.3, 0.5]) and fed.info["seed"] == 3
    big = mixed_regression(d=5, sizes=[100], val_fraction=0.25)
    assert big.val.sizes.tolist() == [25]


def test_mixed_regression_deterministic_and_seeded() -> None:
    kw = {"d": 10, "sizes": "10x20", "test_size": 50}
    a, b, c = mixed_regression(**kw, seed=1), mixed_regression(**kw, seed=1), mixed_regression(**kw, seed=2)
    assert same(a, b) and np.array_equal(a.extras["theta_star"], b.extras["theta_star"])
    assert not torch.equal(a.train.x, c.train.x)
    assert not np.allclose(a.extras["theta_star"], c.extras["theta_star"])
    # independent streams: client sizes do not change the models
    d = mixed_regression(d=10, sizes="7x3", seed=1)
    np.testing.assert_array_equal(a.extras["theta_star"], d.extras["theta_star"])


def test_theta_star_scale() -> None:
    fed = mixed_regression(k=40, d=100, sizes="2x5", test_size=1, seed=0)
    norms = np.linalg.norm(fed.extras["theta_star"], axis=1)
    assert abs(norms.mean() - 2.0) < 0.1  # (2/√d)·N(0, I_d) has ‖θ‖ ≈ 2


def test_least_squares_recovers_theta_star() -> None:
    fed = mixed_regression(k=3, d=100, sizes=[3000, 10], seed=5)
    x, y = fed.train.client(0)
    theta = fed.extras["theta_star"][fed.true_cluster[0]]
    err = np.linalg.norm(lstsq(x, y) - theta)
    assert err < 0.1  # ≈ 0.2·√(d/n) ≈ 0.04
    residual = (y - x @ torch.from_numpy(theta).float()).numpy()
    assert abs(residual.std() - 0.2) < 0.02  # label noise 0.2·N(0, 1)
    xt, yt = fed.test.client(2)  # test client 2 follows θ*_2
    assert np.linalg.norm(lstsq(xt, yt) - fed.extras["theta_star"][2]) < 0.2


def test_mixed_regression_configs() -> None:
    cfg = mixed_regression_config("b")
    assert cfg["name"] == "mixed_regression_B" and cfg["k"] == 3 and cfg["d"] == 100
    fed = mixed_regression(**cfg, seed=0)
    assert fed.num_clients == 920
    sizes = fed.train.sizes
    assert (sizes == 10).sum() == 900 and (sizes == 50).sum() == 20 and sizes.sum() == 10_000
    assert np.all(sizes[:900] == 10) and np.all(sizes[900:] == 50)
    a = mixed_regression_config("A")
    assert parse_sizes(a["sizes"]) == [50] * 200
    c = mixed_regression_config("C")
    assert c["p"] == [0.2, 0.3, 0.5] and c["sizes"] == cfg["sizes"]
    fed_c = mixed_regression(**c, seed=0)
    share = np.bincount(fed_c.true_cluster, minlength=3) / 920
    np.testing.assert_allclose(share, [0.2, 0.3, 0.5], atol=0.06)
    with pytest.raises(ValueError, match="unknown"):
        mixed_regression_config("D")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"p": [0.5, 0.5]}, "len"),
        ({"p": [0.5, 0.5, 0.5]}, "sum to 1"),
        ({"p": [1.2, -0.1, -0.1]}, "non-negative"),
        ({"sizes": [10, -3]}, "≥ 1"),
        ({"sizes": "-5x10"}, "≥ 1"),
        ({"noise": -1.0}, "noise"),
        ({"k": 0}, "k and d"),
        ({"val_fraction": 1.5}, "val_fraction"),
        ({"seed": -1}, "seed"),
    ],
)
def test_mixed_regression_rejects_bad_input(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mixed_regression(**{"d": 5, "sizes": "3x3", **kwargs})


# -- S3 lines ----------------------------------------------------------------------------------
def test_cflgp_lines_layout() -> None:
    fed = cflgp_lines(seed=0)
    assert fed.num_clients == 12 and fed.task == "regression" and fed.input_shape == (1,)
    np.testing.assert_array_equal(np.bincount(fed.true_cluster), [4, 4, 4])
    np.testing.assert_array_equal(fed.train.sizes, [2000] * 12)
    np.testing.assert_array_equal(fed.test_cluster, [0, 1, 2])
    assert fed.info["delta_phi_deg"] == 20.0 and fed.info["batch"] == 10
    phi = np.deg2rad([20.0, 0.0, -20.0])
    np.testing.assert_allclose(fed.extras["theta_star"], np.stack([np.tan(phi), np.zeros(3)], 1))
    np.testing.assert_array_equal(np.bincount(cflgp_lines(num_clients=13).true_cluster), [5, 4, 4])
    given = cflgp_lines(num_clients=4, assignment=[2, 2, 0, 1])
    np.testing.assert_array_equal(given.true_cluster, [2, 2, 0, 1])


def test_cflgp_lines_data_follow_their_angle() -> None:
    fed = cflgp_lines(delta_phi_deg=40.0, seed=1)
    for i in range(fed.num_clients):
        x, y = fed.train.client(i)
        phi = np.deg2rad(fed.info["angles_deg"][fed.true_cluster[i]])
        assert x.min() >= 0 and x.max() <= np.cos(phi) + 1e-6  # x ~ U(0, cos φ)
        slope, intercept = lstsq(torch.cat([x, torch.ones_like(x)], 1), y)
        assert abs(np.rad2deg(np.arctan(slope) - phi)) < 4.0
        assert abs(intercept) < 0.05
    a, b = cflgp_lines(seed=1), cflgp_lines(seed=1)
    assert same(a, b) and not same(a, cflgp_lines(seed=2))


def test_cflgp_lines_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="delta_phi_deg"):
        cflgp_lines(delta_phi_deg=90.0)
    with pytest.raises(ValueError, match="assignment"):
        cflgp_lines(num_clients=3, assignment=[0, 1, 3])
    with pytest.raises(ValueError, match="batch"):
        cflgp_lines(batch=0)
    with pytest.raises(ValueError, match="num_clients"):
        cflgp_lines(num_clients=0)
