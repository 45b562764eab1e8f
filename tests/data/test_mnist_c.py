"""The MNIST-C corruption family (Mu & Gilmer 2019) as FedRC's Fashion-MNIST-C uses it: each style's basic
properties, and the ``family=mnist-c`` scenario key."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.data.shifts.mnist_c import FEDRC_FMNIST_C, MNIST_C, corrupt_mnist_c
from fedcluster.errors import ConfigError

STYLES = [s for s in MNIST_C if s != "identity"]
SEVERITY_GROWS = ["shot_noise", "impulse_noise", "glass_blur", "motion_blur", "shear", "scale", "rotate",
                  "brightness", "translate", "fog"]


def _images(n: int = 12, size: int = 28, seed: int = 0) -> np.ndarray:
    """Garment-like grey batch: a textured blob on a black background, in [0, 1]."""
    rng = np.random.default_rng(seed)
    tex = ndimage.gaussian_filter(rng.random((n, 1, size, size)), sigma=(0, 0, 1, 1))
    tex = (tex - tex.min()) / (tex.max() - tex.min())
    yy, xx = np.mgrid[:size, :size]
    obj = ((yy - size / 2) / (size / 2.6)) ** 2 + ((xx - size / 2) / (size / 3.5)) ** 2 < 1
    return (0.3 + 0.7 * tex) * obj


def test_the_family_is_mnist_c_and_fedrc_draws_all_but_fog() -> None:
    assert len(MNIST_C) == 16 and MNIST_C[0] == "identity"
    assert set(MNIST_C) - set(FEDRC_FMNIST_C) == {"fog"}


@pytest.mark.parametrize("style", MNIST_C)
def test_shape_range_input_untouched_and_seeded(style: str) -> None:
    x = _images()
    before = x.copy()
    y = corrupt_mnist_c(x, style, 3, np.random.default_rng(1))
    assert y.shape == x.shape and y.dtype == np.float32
    assert y.min() >= 0.0 and y.max() <= 1.0
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(y, corrupt_mnist_c(x, style, 3, np.random.default_rng(1)))


@pytest.mark.parametrize("style", STYLES)
def test_every_style_changes_the_image(style: str) -> None:
    x = _images()
    assert np.abs(corrupt_mnist_c(x, style, 1, np.random.default_rng(0)) - x).mean() > 0.005


@pytest.mark.parametrize("style", SEVERITY_GROWS)
def test_severity_5_changes_more_than_1(style: str) -> None:
    x = _images(24)
    diff = [np.abs(corrupt_mnist_c(x, style, s, np.random.default_rng(0)) - x).mean() for s in (1, 5)]
    assert diff[1] > diff[0], diff


def test_identity_stripe_and_brightness_are_exact() -> None:
    x = _images()
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(corrupt_mnist_c(x, "identity", 5, rng), x.astype(np.float32))
    s = corrupt_mnist_c(x, "stripe", 1, rng)
    np.testing.assert_allclose(s[..., :7], 1 - x[..., :7], atol=1e-6)  # 7 of 28 columns inverted on each side
    np.testing.assert_allclose(s[..., 21:], 1 - x[..., 21:], atol=1e-6)
    np.testing.assert_allclose(s[..., 7:21], x[..., 7:21], atol=1e-6)
    np.testing.assert_allclose(corrupt_mnist_c(x, "brightness", 2, rng), np.clip(x + 0.2, 0, 1), atol=1e-6)


def test_geometric_styles_move_the_object() -> None:
    x = _images()
    rng = np.random.default_rng(0)
    mass = x.sum(axis=(1, 2, 3))
    shrunk = corrupt_mnist_c(x, "scale", 5, rng).sum(axis=(1, 2, 3))  # to half its size: a quarter of its mass
    np.testing.assert_allclose(shrunk / mass, 0.25, rtol=0.15)
    turned = corrupt_mnist_c(x, "rotate", 3, rng).sum(axis=(1, 2, 3))  # the object stays inside the frame
    np.testing.assert_allclose(turned / mass, 1.0, rtol=0.05)
    moved = corrupt_mnist_c(x, "translate", 3, rng)
    shifts = {(dr, dc) for dr in (-3, 3) for dc in (-3, 3)}
    for img, out in zip(x, moved, strict=True):  # an integer shift of 3 pixels in each axis, either way
        assert any(np.allclose(ndimage.shift(img[0], (dr, dc), order=0), out[0], atol=1e-5) for dr, dc in shifts)
    sheared = corrupt_mnist_c(x, "shear", 5, rng)
    assert np.abs(sheared - x).mean() > 0.1


def test_noise_rates() -> None:
    x = np.full((20, 1, 28, 28), 0.5, dtype=np.float32)
    imp = corrupt_mnist_c(x, "impulse_noise", 5, np.random.default_rng(0))
    assert np.mean((imp == 0) | (imp == 1)) == pytest.approx(0.27, abs=0.01)  # salt and pepper at rate c
    shot = corrupt_mnist_c(x, "shot_noise", 1, np.random.default_rng(0))
    assert shot.mean() == pytest.approx(0.5, abs=0.01) and shot.std() == pytest.approx(np.sqrt(0.5 / 60), rel=0.1)


def test_lines_only_add_and_edges_are_binary() -> None:
    x = _images()
    rng = np.random.default_rng(0)
    for style in ("dotted_line", "zigzag"):
        y = corrupt_mnist_c(x, style, 3, rng)
        assert (y >= x - 1e-6).all() and (y > x + 0.1).any(axis=(1, 2, 3)).all(), style
    edges = corrupt_mnist_c(x, "canny_edges", 3, rng)
    assert set(np.unique(edges)) <= {0.0, 1.0}
    ring = ndimage.binary_dilation(x[:, 0] > 0, iterations=2) & ~ndimage.binary_erosion(x[:, 0] > 0, iterations=2)
    on = edges[:, 0] > 0
    assert on.any(axis=(1, 2)).all() and (on & ring).sum() / on.sum() > 0.5  # mostly on the object's outline


def test_spatter_covers_with_dark_grey() -> None:
    x = np.ones((30, 1, 28, 28), dtype=np.float32)
    y = corrupt_mnist_c(x, "spatter", 5, np.random.default_rng(0))
    assert (y < 1).any() and y.min() >= 63 / 255 - 1e-6


def test_bad_input() -> None:
    x = _images(2)
    with pytest.raises(ValueError, match="unknown MNIST-C corruption 'frost'"):
        corrupt_mnist_c(x, "frost", 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="grey images"):
        corrupt_mnist_c(np.repeat(x, 3, axis=1), "shear", 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="severity"):
        corrupt_mnist_c(x, "shear", 6, np.random.default_rng(0))


def _build(*overrides: str):  # noqa: ANN202
    cfg, typed = resolve(load_raw(None, ["dataset=digits", "scenario=diverse-shift", "num_clients=30", *overrides]))
    return build_federation(cfg, typed["scenario"], use_cache=False)


def test_scenario_family_key_selects_mnist_c() -> None:
    fed = _build("scenario.family=mnist-c", "scenario.styles=[shear,canny_edges]")
    assert list(fed.style_names) == list(MNIST_C)
    used = {fed.style_names[s] for s in np.unique(fed.style)}
    assert used <= {"identity", "shear", "canny_edges"} and used & {"shear", "canny_edges"}
    default = _build()
    assert default.style_names[0] == "original"  # cifar-c stays the default: existing configs are unchanged
    with pytest.raises(ConfigError, match="unknown corruption styles"):
        resolve(load_raw(None, ["scenario=diverse-shift", "scenario.family=mnist-c", "scenario.styles=[frost]"]))
    with pytest.raises(ConfigError, match="family"):
        resolve(load_raw(None, ["scenario=diverse-shift", "scenario.family=imagenet-c"]))
