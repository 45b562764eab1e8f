"""Geometric feature shift: rotations and downsampling of image batches, and rotation ground truth.

Images are float arrays whose last two axes are (H, W), typically [n, C, H, W].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# CFL-GP paper §5.2 / App. F.5 and its authors' code (``apply_rotations``): eight rotations in four pairs, the last
# pair 5° apart (270° and 275°), the others 15°.
ROTATED_MNIST_ANGLES: tuple[int, ...] = (0, 15, 90, 105, 180, 195, 270, 275)
ROTATED_MNIST_GROUPS: tuple[tuple[int, ...], ...] = ((0, 15), (90, 105), (180, 195), (270, 275))


def rotate(images: np.ndarray, angle_deg: float, order: int = 1, cval: float = 0.0) -> np.ndarray:
    """Rotate every image counter-clockwise by ``angle_deg`` about its centre, keeping the shape.

    FedMD paper §V-D (0/90/180/270°), CFL-GP paper §5.2 / App. F.5 (0/15/90/…/275°), CFL-GP paper App. F.8 (180°).
    Multiples of 90° use the exact ``np.rot90`` (odd quarter turns only for square images); other
    angles use ``scipy.ndimage.rotate`` (reshape=False, spline ``order`` 1 = bilinear, corners
    filled with ``cval``).
    """
    images = np.asarray(images)
    if images.ndim < 2:
        raise ValueError(f"images must have at least 2 dims (..., H, W), got shape {images.shape}")
    a = float(angle_deg) % 360.0
    quarter = a / 90.0
    k = int(round(quarter)) % 4
    square_ok = k % 2 == 0 or images.shape[-1] == images.shape[-2]  # odd quarter turns swap H and W
    if np.isclose(quarter, round(quarter), atol=1e-9) and square_ok:
        return np.ascontiguousarray(np.rot90(images, k=k, axes=(-2, -1)))
    from scipy import ndimage  # imported here: most runs never rotate by other angles (SciPy starts slowly)

    out = ndimage.rotate(images, a, axes=(-2, -1), reshape=False, order=order, mode="constant", cval=cval)
    return out.astype(images.dtype, copy=False)


def _area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] weights: output cell o averages input cells by their overlap with [o·r, (o+1)·r)."""
    r = n_in / n_out
    edges_in = np.arange(n_in + 1, dtype=np.float64)
    lo = np.arange(n_out)[:, None] * r
    hi = lo + r
    overlap = np.clip(np.minimum(hi, edges_in[None, 1:]) - np.maximum(lo, edges_in[None, :-1]), 0.0, None)
    return overlap / r


def downsample(images: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    """Area-average the last two axes down to ``size`` (FedMD paper §V-D: MNIST 28×28 → 14×14).

    Each output pixel is the overlap-weighted mean of the input pixels it covers (a 2×2 block mean
    for 28 → 14), so the image mean is preserved. Non-integer factors are allowed; upsampling is not.
    """
    images = np.asarray(images)
    if images.ndim < 2:
        raise ValueError(f"images must have at least 2 dims (..., H, W), got shape {images.shape}")
    h_out, w_out = (size, size) if isinstance(size, int | np.integer) else size
    h, w = images.shape[-2:]
    if not (1 <= h_out <= h and 1 <= w_out <= w):
        raise ValueError(f"size {(h_out, w_out)} must be between 1 and the input size {(h, w)}")
    if h % h_out == 0 and w % w_out == 0:  # integer factors: exact block mean
        fh, fw = h // h_out, w // w_out
        blocks = images.reshape(*images.shape[:-2], h_out, fh, w_out, fw)
        out = blocks.mean(axis=(-3, -1), dtype=np.float64)
    else:
        out = np.einsum("oh,...hw,pw->...op", _area_matrix(h, h_out), images, _area_matrix(w, w_out))
    dtype = images.dtype if np.issubdtype(images.dtype, np.floating) else np.float32
    return out.astype(dtype)


def rotation_clusters(
    angles: Sequence[float] | np.ndarray,
    groups: Sequence[Sequence[float]] | None = None,
) -> np.ndarray:
    """Ground-truth cluster id of each rotation angle (CFL-GP paper §5.2 / App. F.5).

    With ``groups`` (e.g. ``ROTATED_MNIST_GROUPS``), an angle's id is the index of the group that
    contains it (mod 360). Without, angles are grouped by quadrant [0, 90), [90, 180), … — this puts
    {0, 15}, {90, 105}, {180, 195}, {270, 275} together as CFL-GP paper does, and keeps 0/90/180/270 apart —
    and ids are numbered 0.. in increasing quadrant order of the quadrants that occur.
    """
    ang = np.mod(np.asarray(angles, dtype=np.float64), 360.0)
    if ang.ndim != 1:
        raise ValueError("angles must be 1-D")
    if groups is None:
        quadrant = np.floor(ang / 90.0 + 1e-9).astype(np.int64) % 4
        _, ids = np.unique(quadrant, return_inverse=True)
        return ids.astype(np.int64)
    ids = np.full(len(ang), -1, dtype=np.int64)
    for g, members in enumerate(groups):
        hit = np.isclose(ang[:, None], np.mod(np.asarray(members, dtype=np.float64), 360.0)[None, :]).any(1)
        if np.any(hit & (ids >= 0)):
            raise ValueError(f"angles {ang[hit & (ids >= 0)].tolist()} belong to more than one group")
        ids[hit] = g
    if np.any(ids < 0):
        raise ValueError(f"angles {ang[ids < 0].tolist()} are in no group")
    return ids
