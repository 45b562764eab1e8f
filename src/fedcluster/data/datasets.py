"""Registered data sources: real image sets (loaded from disk, never downloaded) and synthetic ones."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedcluster.catalog.registry import DATASETS
from fedcluster.data.sources.base import ArrayDataset
from fedcluster.data.sources.cifar import load_cifar10, load_cifar100
from fedcluster.data.sources.digits import load_digits
from fedcluster.data.sources.fashion_mnist import DEBIAN_DIR, load_fashion_mnist
from fedcluster.data.sources.leaf import load_femnist
from fedcluster.data.sources.mnist import load_emnist, load_mnist
from fedcluster.data.sources.streams import AIRLINE_NEEDS, ELECTRICITY_NEEDS, load_airline, load_electricity
from fedcluster.data.sources.tiny_imagenet import load_tiny_imagenet
from fedcluster.errors import ConfigError


@dataclass(frozen=True)
class DatasetSpec:
    """``load(data_dir)`` returns the arrays; synthetic sources have no loader (their scenario generates).
    ``standardize``: inputs are standardised per channel unless the run says ``normalize=false`` (the real image
    sets, as FL-bench and PyTorch users expect; scikit-learn's 8×8 digits stay in [0, 1], the scale the
    embedded demo's calibrated tolerances assume)."""

    load: Callable[[str | None], ArrayDataset] | None
    synthetic_scenario: str | None = None
    standardize: bool = False
    reads_files: bool = True  # read from data_dir (or default_dir): the cache is keyed by those files
    default_dir: Path | None = None  # where the files are read from when no data_dir is given
    classes: int | None = None  # its fixed number of classes (None: the files decide, e.g. Tiny-ImageNet's wnids)


def _needs_dir(name: str, loader: Callable[[str], ArrayDataset]) -> Callable[[str | None], ArrayDataset]:
    def load(data_dir: str | None) -> ArrayDataset:
        if data_dir is None:
            raise ConfigError(f"dataset {name!r} is read from files: pass data_dir=/path/to/{name} "
                              "(standard distribution files; nothing is downloaded)")
        return loader(data_dir)

    return load


def _needs_file(name: str, loader: Callable[[str], ArrayDataset], files: str) -> Callable[[str | None], ArrayDataset]:
    """As :func:`_needs_dir`, the message naming the file the folder must hold."""
    def load(data_dir: str | None) -> ArrayDataset:
        if data_dir is None:
            raise ConfigError(f"dataset {name!r} is read from your own copy: pass data_dir=DIR, a folder holding "
                              f"{files} (nothing is downloaded)")
        return loader(data_dir)

    return load


DATASETS.add("digits", DatasetSpec(lambda _dir: load_digits(), reads_files=False, classes=10),
             "scikit-learn's bundled 8×8 handwritten digits (1,797 images, 10 classes)")
DATASETS.add("fashion-mnist", DatasetSpec(lambda d: load_fashion_mnist(d), standardize=True, classes=10,
                                          default_dir=DEBIAN_DIR),
             "Fashion-MNIST 28×28 (70,000 images; Debian package dataset-fashion-mnist or data_dir=)")
DATASETS.add("mnist", DatasetSpec(_needs_dir("mnist", load_mnist), standardize=True, classes=10),
             "MNIST 28×28 from idx files in data_dir=")
DATASETS.add("emnist", DatasetSpec(_needs_dir("emnist", load_emnist), standardize=True, classes=47),
             "EMNIST (balanced split) 28×28 from idx files in data_dir=")
DATASETS.add("cifar10", DatasetSpec(_needs_dir("cifar10", load_cifar10), standardize=True, classes=10),
             "CIFAR-10 32×32 RGB from the python pickle batches in data_dir=")
DATASETS.add("cifar100", DatasetSpec(_needs_dir("cifar100", load_cifar100), standardize=True, classes=100),
             "CIFAR-100 32×32 RGB (fine labels) from the python pickle batches in data_dir=")
DATASETS.add("femnist", DatasetSpec(_needs_dir("femnist", load_femnist), standardize=True, classes=62),
             "FEMNIST 28×28, 62 classes, grouped by writer (LEAF's JSON files in data_dir=; scenario=natural)")
DATASETS.add("airline", DatasetSpec(_needs_file("airline", load_airline, AIRLINE_NEEDS), classes=2),
             "Airline flight delays, the first 58,100 records (FedRC paper Table 3; airline_14col.data in data_dir=)")
DATASETS.add("electricity", DatasetSpec(_needs_file("electricity", load_electricity, ELECTRICITY_NEEDS), classes=2),
             "Electricity (Elec2) price moves, 45,312 records (FedRC paper Table 3; electricity-normalized.csv in "
             "data_dir=)")
DATASETS.add("tiny-imagenet", DatasetSpec(_needs_dir("tiny-imagenet", load_tiny_imagenet), standardize=True),
             "Tiny-ImageNet 64×64 RGB, 200 classes (the extracted tiny-imagenet-200 folder in data_dir=)")
DATASETS.add("mixed-regression", DatasetSpec(None, synthetic_scenario="mixed-regression"),
             "FedMD paper synthetic mixed linear regression (scenario=mixed-regression scenario.config=A|B|C)")
DATASETS.add("cflgp-lines", DatasetSpec(None, synthetic_scenario="cflgp-lines"),
             "CFL-GP paper synthetic three-lines regression (scenario=cflgp-lines scenario.delta_phi=20)")
