"""A picture of every corruption of a feature-shift family at every severity (docs figure, ``scripts/``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedcluster.data.shifts.corruptions import CORRUPTIONS, SEVERITIES, corrupt
from fedcluster.data.shifts.mnist_c import MNIST_C, corrupt_mnist_c

FAMILIES = {"mnist-c": (MNIST_C, corrupt_mnist_c), "cifar-c": (CORRUPTIONS, corrupt)}


def corruption_gallery(images: np.ndarray, family: str, path: Path, seed: int = 0) -> Path:
    """One row per style of ``family``, one column per (image, severity 1..5); ``images`` [m, C, H, W] in [0, 1]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles, fn = FAMILIES[family]
    m = len(images)
    fig, axes = plt.subplots(len(styles), m * len(SEVERITIES), squeeze=False,
                             figsize=(0.75 * m * len(SEVERITIES) + 1.6, 0.75 * len(styles) + 0.5))
    for r, style in enumerate(styles):
        for i in range(m):
            for j, severity in enumerate(SEVERITIES):
                img = fn(images[i: i + 1], style, severity, np.random.default_rng([seed, r, i, j]))[0]
                ax = axes[r, i * len(SEVERITIES) + j]
                ax.imshow(np.moveaxis(img, 0, -1).squeeze(-1) if img.shape[0] == 1 else np.moveaxis(img, 0, -1),
                          cmap="gray", vmin=0, vmax=1, interpolation="nearest")
                ax.set_xticks([])
                ax.set_yticks([])
                if r == 0:
                    ax.set_title(f"sev. {severity}", fontsize=7)
        axes[r, 0].set_ylabel(style.replace("_", " "), rotation=0, ha="right", va="center", fontsize=8)
    fig.suptitle(f"{family} corruptions, severities 1-5", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
