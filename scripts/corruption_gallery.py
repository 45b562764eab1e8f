"""Write docs/figures/corruptions-FAMILY.png: every corruption of a feature-shift family on two Fashion-MNIST
test images at severities 1-5.

Usage: PYTHONPATH=src python scripts/corruption_gallery.py [--family mnist-c|cifar-c] [--out PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from fedcluster.catalog.registry import DATASETS
from fedcluster.data.gallery import FAMILIES, corruption_gallery


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=sorted(FAMILIES), default="mnist-c")
    ap.add_argument("--out", default=None, help="default docs/figures/corruptions-FAMILY.png")
    args = ap.parse_args()
    data = DATASETS.get("fashion-mnist").obj.load(None)
    images = np.asarray(data.x_test[[0, 1]], dtype=np.float32)  # an ankle boot and a pullover
    out = Path(args.out or f"docs/figures/corruptions-{args.family}.png")
    print(corruption_gallery(images, args.family, out))


if __name__ == "__main__":
    main()
