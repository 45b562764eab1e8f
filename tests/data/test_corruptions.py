"""Tests for the CIFAR-10-C / FashionMNIST-C style corruptions (feature shift)."""

from __future__ import annotations

import colorsys
import io

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from fedcluster.data.shifts import corruptions
from fedcluster.data.shifts.corruptions import CORRUPTIONS, corrupt

STYLES = [s for s in CORRUPTIONS if s != "original"]
MONOTONE = [
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "gaussian_blur",
    "contrast",
    "brightness",
    "pixelate",
    "jpeg_compression",
]


def _images(n: int, channels: int, size: int, seed: int = 0) -> np.ndarray:
    """Fashion-MNIST-like batch: smooth textured object on a dark background, values in [0, 1]."""
    rng = np.random.default_rng(seed)
    tex = ndimage.gaussian_filter(rng.random((n, channels, size, size)), sigma=(0, 0, size / 28, size / 28))
    tex = (tex - tex.min()) / (tex.max() - tex.min())
    yy, xx = np.mgrid[:size, :size]
    obj = (yy - size / 2) ** 2 + (xx - size / 2) ** 2 < (size / 3) ** 2
    return np.where(obj, 0.2 + 0.75 * tex, 0.05 * tex).astype(np.float32)


GRAY = _images(6, 1, 28)
RGB = _images(4, 3, 32, seed=1)
BATCHES = {"gray28": GRAY, "rgb32": RGB, "gray8": _images(4, 1, 8, seed=2)}


def _mad(style: str, images: np.ndarray, severity: int, seed: int = 0) -> float:
    out = corrupt(images, style, severity, np.random.default_rng(seed))
    return float(np.abs(out - images).mean())


def test_style_names() -> None:
    assert len(CORRUPTIONS) == 20 and len(set(CORRUPTIONS)) == 20
    assert CORRUPTIONS[0] == "original" and CORRUPTIONS[-1] == "saturate"


@pytest.mark.parametrize("batch", list(BATCHES))
@pytest.mark.parametrize("style", CORRUPTIONS)
def test_shape_dtype_range(style: str, batch: str) -> None:
    images = BATCHES[batch]
    before = images.copy()
    for severity in (1, 3, 5):
        out = corrupt(images, style, severity, np.random.default_rng(severity))
        assert out.shape == images.shape and out.dtype == np.float32
        assert np.isfinite(out).all() and out.min() >= 0.0 and out.max() <= 1.0
        assert out is not images
    np.testing.assert_array_equal(images, before)  # input untouched


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_original_is_identity(severity: int) -> None:
    for images in (GRAY, RGB):
        np.testing.assert_array_equal(corrupt(images, "original", severity, np.random.default_rng(0)), images)


@pytest.mark.parametrize("style", STYLES)
def test_every_style_changes_the_image(style: str) -> None:
    for images in BATCHES.values():
        assert _mad(style, images, 3) > 5e-3


@pytest.mark.parametrize("style", MONOTONE)
def test_severity_5_changes_more_than_1(style: str) -> None:
    for images in (GRAY, RGB):
        assert _mad(style, images, 5) > _mad(style, images, 1)


@pytest.mark.parametrize("style", STYLES)
def test_deterministic_for_a_seed(style: str) -> None:
    a = corrupt(RGB, style, 4, np.random.default_rng(7))
    b = corrupt(RGB, style, 4, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("style", ["gaussian_noise", "glass_blur", "motion_blur", "snow", "frost", "fog"])
def test_randomness_comes_from_rng(style: str) -> None:
    a = corrupt(GRAY, style, 3, np.random.default_rng(1))
    b = corrupt(GRAY, style, 3, np.random.default_rng(2))
    assert not np.array_equal(a, b)


def test_chunked_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corruptions, "_CHUNK_ELEMENTS", 2 * 28 * 28)  # 3 chunks for 6 images
    for style in ("motion_blur", "jpeg_compression", "frost"):
        out = corrupt(GRAY, style, 3, np.random.default_rng(0))
        assert out.shape == GRAY.shape
        np.testing.assert_array_equal(out, corrupt(GRAY, style, 3, np.random.default_rng(0)))


def test_unknown_style_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="valid styles") as err:
        corrupt(GRAY, "rain", 3, np.random.default_rng(0))
    assert all(name in str(err.value) for name in CORRUPTIONS)


@pytest.mark.parametrize("severity", [0, 6, -1, 2.5, True, "3"])
def test_bad_severity(severity: object) -> None:
    with pytest.raises(ValueError, match=r"\(1, 2, 3, 4, 5\)"):
        corrupt(GRAY, "fog", severity, np.random.default_rng(0))  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", [(28, 28), (2, 2, 28, 28), (2, 1, 1, 28, 28)])
def test_bad_shape(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="shape"):
        corrupt(np.zeros(shape, dtype=np.float32), "fog", 1, np.random.default_rng(0))


def test_integer_images_are_rejected() -> None:
    with pytest.raises(ValueError, match="floating point"):
        corrupt((GRAY * 255).astype(np.uint8), "fog", 1, np.random.default_rng(0))


def test_grey_jpeg_mosaic_equals_single_images() -> None:
    images = _images(5, 1, 28, seed=3)
    out = corrupt(images, "jpeg_compression", 5, np.random.default_rng(0))
    for img, got in zip(images, out, strict=True):
        buf = io.BytesIO()
        Image.fromarray(np.rint(img[0] * 255).astype(np.uint8)).save(buf, format="JPEG", quality=40)
        buf.seek(0)
        np.testing.assert_array_equal(np.rint(got[0] * 255), np.asarray(Image.open(buf)))


@pytest.mark.parametrize(("style", "severity"), [("brightness", 4), ("saturate", 2), ("saturate", 5)])
def test_hsv_styles_match_a_per_pixel_round_trip(style: str, severity: int) -> None:
    images = _images(1, 3, 8, seed=4)
    images[0, :, 0, :3] = np.array([0.5, 0.0, 1.0])  # a grey, a black and a white pixel
    out = corrupt(images, style, severity, np.random.default_rng(0))
    shift = (0.05, 0.1, 0.15, 0.2, 0.3)[severity - 1]
    c0, c1 = ((0.3, 0.0), (0.1, 0.0), (1.5, 0.0), (2.0, 0.1), (2.5, 0.2))[severity - 1]
    for r in range(8):
        for col in range(8):
            h, s, v = colorsys.rgb_to_hsv(*images[0, :, r, col])
            if style == "brightness":
                v = min(v + shift, 1.0)
            else:
                s = min(s * c0 + c1, 1.0)
            np.testing.assert_allclose(out[0, :, r, col], colorsys.hsv_to_rgb(h, s, v), atol=1e-5)


def test_grey_saturate_is_affine_intensity_map() -> None:
    out = corrupt(GRAY, "saturate", 4, np.random.default_rng(0))
    np.testing.assert_allclose(out, np.clip(2.0 * GRAY + 0.1, 0, 1), atol=1e-6)
