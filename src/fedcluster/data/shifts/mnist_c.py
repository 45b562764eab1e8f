"""Feature shift: the MNIST-C corruption family (Mu & Gilmer, "MNIST-C: A Robustness Benchmark for Computer
Vision", ICML 2019 Workshop on Uncertainty & Robustness in Deep Learning, arXiv:1906.02337) for grey images.

FedRC (Guo, Tang, Lin, ICML 2024) builds its Fashion-MNIST feature shift from this family ("Fashion-MNIST-C"):
its public code (github.com/LINs-lab/FedRC, ``create_c/make_fmnist_c.py``) gives every corrupted client one of
identity, shot noise, impulse noise, glass blur, motion blur, shear, scale, rotate, brightness, translate,
stripe, spatter, dotted line, zigzag and Canny edges (fog is commented out there), with a severity in 1..5.
These are geometric and structural changes (a sheared, shrunken, edge-only or half-inverted garment), a much
stronger style shift than the CIFAR-10-C family of :mod:`.corruptions` scaled down to 28×28.

``corrupt_mnist_c(images, style, severity, rng)`` applies one style to a batch ``[n, 1, H, W]`` (float in
[0, 1]) and returns a new clipped float32 array. Severity tables follow FedRC's code (which extends MNIST-C's
single severity to five); coordinates written for 28×28 (the stripe's columns, the lines' end points) scale
with the image. Every random draw (noise, signs, line positions, angles) comes from ``rng`` and is made per
image. Implemented with numpy and scipy.ndimage only; differences from the reference code:

* affine styles (shear, rotate, scale, translate) resample bilinearly with zero fill about the image centre,
  as ``skimage.transform.warp``; the direction of shear/rotate/translate is a random sign per image;
* glass blur's "local shuffle" is one random gather per iteration (each interior pixel takes the value of a
  random neighbour within the maximal shift), not the reference's sequential pairwise swaps;
* motion blur is the numpy ImageMagick-style one-sided Gaussian blur of :mod:`.corruptions` at MNIST-C's
  radii (10-20 pixels), not Wand/ImageMagick;
* Canny edges: Gaussian σ = 1, Sobel gradients, non-maximum suppression in four directions and hysteresis
  at 0.1 / 0.2 of the intensity range (skimage's defaults for float images);
* fog is :mod:`.corruptions`' fog (the same plasma-fractal formula as MNIST-C's).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import ndimage

from fedcluster.data.shifts.corruptions import SEVERITIES, _gather, _gaussian, corrupt
from fedcluster.data.shifts.corruptions import _motion_blur as _motion_taps

MNIST_C: tuple[str, ...] = (
    "identity",
    "shot_noise",
    "impulse_noise",
    "glass_blur",
    "motion_blur",
    "shear",
    "scale",
    "rotate",
    "brightness",
    "translate",
    "stripe",
    "fog",
    "spatter",
    "dotted_line",
    "zigzag",
    "canny_edges",
)
FEDRC_FMNIST_C: tuple[str, ...] = tuple(s for s in MNIST_C if s != "fog")  # the styles FedRC's code draws


def corrupt_mnist_c(images: np.ndarray, style: str, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Apply MNIST-C corruption ``style`` at ``severity`` (1..5) to grey ``images`` [n, 1, H, W] in [0, 1].

    Returns a new float32 array of the same shape clipped to [0, 1]; ``images`` is not modified.
    """
    if style not in MNIST_C:
        raise ValueError(f"unknown MNIST-C corruption {style!r}; valid: {', '.join(MNIST_C)}")
    if isinstance(severity, bool) or not isinstance(severity, int | np.integer) or severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")
    x = np.asarray(images)
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"MNIST-C corruptions need grey images [n, 1, H, W], got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"images must be floating point in [0, 1], got dtype {x.dtype}")
    if style == "fog":
        return corrupt(x, "fog", int(severity), rng)
    out = _STYLES[style](np.array(x, dtype=np.float32), int(severity), rng)
    return np.clip(out, 0.0, 1.0).astype(np.float32, copy=False)


# ----------------------------------------------------------------------------------------------------------
# noise and blur


def _identity(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    return x


def _shot_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = (60, 25, 12, 5, 3)[severity - 1]
    return rng.poisson(np.clip(x, 0, 1) * c).astype(np.float32) / np.float32(c)


def _impulse_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = (0.03, 0.06, 0.09, 0.17, 0.27)[severity - 1]  # share of pixels set to 0 or 1 (salt and pepper)
    u = rng.random(x.shape, dtype=np.float32)
    x[u < c / 2] = 0.0
    x[(u >= c / 2) & (u < c)] = 1.0
    return x


def _glass_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    sigma, delta, iterations = ((0.7, 1, 2), (0.9, 2, 1), (1.0, 2, 3), (1.1, 3, 2), (1.5, 4, 2))[severity - 1]
    n, c, h, w = x.shape
    x = _gaussian(x, sigma)
    side = 2 * delta  # offsets in [-delta, delta), as numpy's randint(-delta, delta)
    for _ in range(iterations):
        dy = rng.integers(-delta, delta, size=(n, h - side, w - side))
        dx = rng.integers(-delta, delta, size=(n, h - side, w - side))
        offset = np.zeros((n, h, w), dtype=np.int64)
        offset[:, delta: h - delta, delta: w - delta] = dy * w + dx
        idx = offset.reshape(n, h * w) + np.arange(h * w)
        x = _gather(x.reshape(n, c, h * w), idx).reshape(n, c, h, w)
    return _gaussian(x, sigma)


def _motion_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    radius, sigma = ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15))[severity - 1]
    return _motion_taps(x, radius, sigma, rng.uniform(-45, 45, size=x.shape[0]))


def _brightness(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    return x + np.float32((0.1, 0.2, 0.3, 0.4, 0.5)[severity - 1])  # HSV value + c of a grey pixel


def _spatter(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Mud spatter (FedRC's code keeps only MNIST-C's mud mode): dark grey (63/255) blobs cover the image."""
    loc, scale, sigma, threshold, blur = ((0.65, 0.3, 4, 0.69, 0.6), (0.65, 0.3, 3, 0.68, 0.6),
                                          (0.65, 0.3, 2, 0.68, 0.5), (0.65, 0.3, 1, 0.65, 1.5),
                                          (0.67, 0.4, 1, 0.65, 1.5))[severity - 1]
    liquid = _gaussian(rng.normal(loc, scale, size=x.shape).astype(np.float32), sigma)
    m = _gaussian((liquid > threshold).astype(np.float32), blur)
    m[m < 0.8] = 0.0
    return x * (1 - m) + np.float32(63 / 255) * m


# ----------------------------------------------------------------------------------------------------------
# affine styles: output pixel p reads the input at A (p − centre) + centre + t (bilinear, zero outside)


def _affine(x: np.ndarray, matrices: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Per-image inverse maps in (row, col) coordinates: ``matrices`` [n, 2, 2], ``shifts`` [n, 2]."""
    n, _, h, w = x.shape
    centre = np.array([(h - 1) / 2, (w - 1) / 2])
    out = np.empty_like(x)
    for i in range(n):
        offset = centre - matrices[i] @ centre + shifts[i]
        out[i, 0] = ndimage.affine_transform(x[i, 0], matrices[i], offset, order=1, mode="constant", cval=0.0)
    return out


def _signs(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice(np.array([-1.0, 1.0]), size=n)


def _xy_to_rc(a: np.ndarray) -> np.ndarray:
    """An [n, 2, 2] map in (x = col, y = row) coordinates as one in (row, col) coordinates."""
    return a[:, ::-1, ::-1]


def _shear(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = (0.2, 0.4, 0.6, 0.8, 1.0)[severity - 1] * _signs(rng, x.shape[0])
    a = np.zeros((x.shape[0], 2, 2))
    a[:, 0, 0], a[:, 0, 1], a[:, 1, 1] = 1.0, -np.sin(c), np.cos(c)  # skimage's AffineTransform(shear=c)
    return _affine(x, _xy_to_rc(a), np.zeros((x.shape[0], 2)))


def _rotate(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = (0.2, 0.4, 0.6, 0.8, 1.0)[severity - 1] * _signs(rng, x.shape[0])  # radians
    a = np.stack([np.stack([np.cos(c), -np.sin(c)], -1), np.stack([np.sin(c), np.cos(c)], -1)], 1)
    return _affine(x, _xy_to_rc(a), np.zeros((x.shape[0], 2)))


def _scale(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    s = 1 / (0.9, 0.8, 0.7, 0.6, 0.5)[severity - 1]  # the object shrinks to 0.9 … 0.5 of its size
    n = x.shape[0]
    return _affine(x, np.repeat(np.eye(2)[None] * s, n, 0), np.zeros((n, 2)))


def _translate(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    n = x.shape[0]
    shifts = severity * np.stack([_signs(rng, n), _signs(rng, n)], 1) * min(x.shape[-2:]) / 28
    return _affine(x, np.repeat(np.eye(2)[None], n, 0), shifts)


def _stripe(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    w = x.shape[-1]
    band = w // 4  # 7 of 28 columns on each side are inverted
    x[..., :band] = 1.0 - x[..., :band]
    x[..., w - band:] = 1.0 - x[..., w - band:]
    return x


# ----------------------------------------------------------------------------------------------------------
# lines drawn over the image


def _line(h: int, w: int, c0: float, r0: float, c1: float, r1: float) -> np.ndarray:
    """MNIST-C's soft line from (c0, r0) to (c1, r1): 1 + log(1 − d / 2.3) of the vertical distance d,
    zero left of floor(c0) and from ceil(c1) on."""
    if c1 == c0:
        return np.zeros((h, w), dtype=np.float32)
    cc, rr = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64), sparse=True)
    dist = np.clip(np.abs(rr - ((r1 - r0) / (c1 - c0) * (cc - c0) + r0)), 0, 2.3 - 1e-10)
    line = np.clip(np.log(1 - dist / 2.3) + 1, 0, 1)
    line[:, : int(np.floor(c0))] = 0
    line[:, int(np.ceil(c1)):] = 0
    return line.astype(np.float32)


def _dotted_line(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    n, _, h, w = x.shape
    for i in range(n):
        r0, r1 = rng.integers(0, h - 1, size=2)
        line = _line(h, w, 0, r0, w - 1, r1)
        for start in range(0, w, 4):  # 2 columns drawn, 2 blank
            line[:, start: start + 2] = 0
        x[i, 0] += line
    return x


def _zigzag(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    n, _, h, w = x.shape
    a = b = 2.0 * w / 28  # half-period and amplitude of the zigzag
    c0, c1 = 2 * w / 28, 25 * w / 28
    for i in range(n):
        r0 = float(rng.integers(0, h - 1))
        r1 = r0 + float(rng.integers(-5, 5))
        theta = np.arctan((r1 - r0) / (c1 - c0))
        d = (c1 - c0) / np.cos(theta)
        k = np.arange(int((d - a) // (2 * a)) + 1)
        pts = np.concatenate([[[0.0, 0.0]], np.stack([(2 * k + 1) * a, (-1.0) ** k * b], 1)])
        if d != 2 * a * (d // (2 * a)):
            pts = np.concatenate([pts, [[d, 0.0]]])
        rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
        cs, rs = rot @ pts.T
        img = x[i, 0]
        for j in range(1, len(cs)):
            (ca, ra), (cb, rb) = sorted([(cs[j - 1] + c0, rs[j - 1] + r0), (cs[j] + c0, rs[j] + r0)])
            img = np.clip(img + _line(h, w, ca, ra, cb, rb), 0, 1)
        x[i, 0] = img
    return x


def _canny_edges(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Binary Canny edge map of each image (σ = 1, hysteresis 0.1 / 0.2)."""
    g = _gaussian(x[:, 0].astype(np.float64), 1.0, mode="constant")
    gy = ndimage.sobel(g, axis=1)
    gx = ndimage.sobel(g, axis=2)
    mag = np.hypot(gx, gy)
    angle = (np.rad2deg(np.arctan2(gy, gx)) + 180) % 180
    sector = (((angle + 22.5) // 45) % 4).astype(np.int64)  # 0: horizontal gradient, 1: 45°, 2: vertical, 3: 135°
    steps = np.array([[0, 1], [1, 1], [1, 0], [1, -1]])
    pad = np.pad(mag, ((0, 0), (1, 1), (1, 1)))
    n, h, w = mag.shape
    rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    dr, dc = steps[sector, 0], steps[sector, 1]
    idx = np.arange(n)[:, None, None]
    ahead = pad[idx, rows + 1 + dr, cols + 1 + dc]
    behind = pad[idx, rows + 1 - dr, cols + 1 - dc]
    peak = (mag >= ahead) & (mag >= behind) & (mag > 0)
    peak[:, [0, -1], :] = False
    peak[:, :, [0, -1]] = False
    weak, strong = peak & (mag >= 0.1), peak & (mag >= 0.2)
    structure = np.zeros((3, 3, 3), dtype=bool)
    structure[1] = True  # 8-connected within an image, never across images
    labels, count = ndimage.label(weak, structure=structure)
    keep = np.zeros(count + 1, dtype=bool)
    keep[np.unique(labels[strong])] = True
    keep[0] = False
    return keep[labels][:, None].astype(np.float32)


_STYLES: dict[str, Callable[[np.ndarray, int, np.random.Generator], np.ndarray]] = {
    "identity": _identity, "shot_noise": _shot_noise, "impulse_noise": _impulse_noise, "glass_blur": _glass_blur,
    "motion_blur": _motion_blur, "shear": _shear, "scale": _scale, "rotate": _rotate, "brightness": _brightness,
    "translate": _translate, "stripe": _stripe, "spatter": _spatter, "dotted_line": _dotted_line,
    "zigzag": _zigzag, "canny_edges": _canny_edges,
}
