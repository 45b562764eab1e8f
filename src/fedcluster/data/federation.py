"""The federation container: every client's data as a few big tensors plus the ground truth.

A federation is built once from a seed and never re-read during training. Samples of all clients
are stored back to back (CSR style): client ``i`` owns rows ``ptr[i]:ptr[i+1]`` of ``x``/``y``.
The same layout holds the per-client local validation sets and the non-participating test
clients (one per concept/cluster). Ground truth for scoring clustering is kept beside the data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from fedcluster.storage.state_file import StateFileError, load_state, save_state

MAX_CLASSES = 100_000  # more classes than any data set has (Tiny-ImageNet: 200): a larger count is refused

Task = Literal["classification", "regression"]


class ClientRows:
    """The CSR layout shared by every split: client ``i`` owns global rows ``ptr[i]:ptr[i+1]``."""

    ptr: np.ndarray

    @property
    def num_clients(self) -> int:
        return len(self.ptr) - 1

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.ptr)

    @property
    def num_samples(self) -> int:
        return int(self.ptr[-1])

    def owner(self) -> np.ndarray:
        """Client id of every sample."""
        return np.repeat(np.arange(self.num_clients), self.sizes)


@dataclass
class Split(ClientRows):
    """Samples of several clients stored back to back; client ``i`` owns ``ptr[i]:ptr[i+1]``."""

    x: torch.Tensor
    y: torch.Tensor
    ptr: np.ndarray
    # Rows a non-participating client may use to choose its cluster weights (the others are scored);
    # None: every row does both (engine.evaluation.holdout).
    fit: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.ptr = np.asarray(self.ptr, dtype=np.int64)
        if self.fit is not None and len(self.fit) != len(self.x):
            raise ValueError("split fit mask needs one entry per sample")
        if self.ptr[0] != 0 or self.ptr[-1] != len(self.x) or len(self.x) != len(self.y):
            raise ValueError("split offsets do not match the number of samples")
        if np.any(np.diff(self.ptr) < 0):
            raise ValueError("split offsets must be non-decreasing")

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x.shape[1:])

    @property
    def device(self) -> torch.device:
        return self.x.device

    def client(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = int(self.ptr[i]), int(self.ptr[i + 1])
        return self.x[lo:hi], self.y[lo:hi]

    def take(self, rows: np.ndarray) -> torch.Tensor:
        """The inputs of ``rows``."""
        return self.x[torch.as_tensor(np.asarray(rows, dtype=np.int64)).to(self.x.device, non_blocking=True)]

    def set_inputs(self, x: torch.Tensor) -> None:
        """Replace the inputs (same rows) in place."""
        self.x = x

    def local(self) -> Split:
        """The rows this process holds: all of them (see ``data.sharded`` for a split spread over processes)."""
        return self

    def nbytes(self) -> int:
        """Bytes of the split's tensors (inputs and labels)."""
        return self.x.nbytes + self.y.nbytes

    def to(self, device: torch.device | str) -> Split:
        return Split(self.x.to(device), self.y.to(device), self.ptr, self.fit)

    def with_fit(self, fit: np.ndarray | None) -> Split:
        """The same rows with another ``fit`` mask (engine.evaluation.holdout)."""
        return Split(self.x, self.y, self.ptr, fit)

    def rows(self, keep: np.ndarray) -> Split:
        """The same clients with only the rows where ``keep`` is true."""
        keep = np.asarray(keep, dtype=bool)
        sizes = np.bincount(self.owner()[keep], minlength=self.num_clients)
        idx = torch.as_tensor(np.flatnonzero(keep)).to(self.x.device, non_blocking=True)  # no host sync
        return Split(self.x[idx], self.y[idx], np.concatenate([[0], np.cumsum(sizes)]))

    @staticmethod
    def from_parts(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], regression: bool = False) -> Split:
        sizes = [len(a) for a in xs]
        ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        x = torch.from_numpy(np.ascontiguousarray(np.concatenate(xs).astype(np.float32)))
        ydtype = np.float32 if regression else np.int64
        y = torch.from_numpy(np.concatenate(ys).astype(ydtype))
        return Split(x, y, ptr)


@dataclass
class Federation:
    """All data of one federated experiment.

    Attributes:
        train, val: participating clients' training and local-validation data (same clients).
        test: non-participating test clients (usually one per concept).
        true_cluster: ground-truth cluster/concept id of every participating client.
        test_cluster: ground-truth cluster id of every test client.
        sample_concept: ground-truth concept of every training sample (clients that mix sources).
        style: feature-style id per client (-1 = none) with names in ``style_names``.
        num_classes: number of classes (0 for regression).
        extras: scenario-specific ground truth, e.g. ``theta_star`` for mixed regression.
        info: the scenario description (name and resolved parameters).
    """

    train: Split
    val: Split
    test: Split
    true_cluster: np.ndarray
    test_cluster: np.ndarray
    num_classes: int
    task: Task = "classification"
    sample_concept: np.ndarray | None = None
    style: np.ndarray | None = None
    style_names: list[str] = field(default_factory=list)
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.true_cluster = np.asarray(self.true_cluster, dtype=np.int64)
        self.test_cluster = np.asarray(self.test_cluster, dtype=np.int64)
        if self.train.num_clients != self.val.num_clients:
            raise ValueError("train and validation splits must have the same clients")
        if len(self.true_cluster) != self.train.num_clients:
            raise ValueError("true_cluster needs one entry per client")
        if len(self.test_cluster) != self.test.num_clients:
            raise ValueError("test_cluster needs one entry per test client")
        if self.sample_concept is not None and len(self.sample_concept) != self.train.num_samples:
            raise ValueError("sample_concept needs one entry per training sample")
        if self.style is None:
            self.style = np.full(self.num_clients, -1, dtype=np.int64)

    @property
    def num_clients(self) -> int:
        return self.train.num_clients

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.train.input_shape

    @property
    def output_dim(self) -> int:
        return self.num_classes if self.task == "classification" else 1

    @property
    def num_concepts(self) -> int:
        return int(max(self.true_cluster.max(initial=0), self.test_cluster.max(initial=0)) + 1)

    def to(self, device: torch.device | str) -> Federation:
        """The federation with its train/val/test tensors on ``device`` (moved once; ground truth stays NumPy)."""
        device = torch.device(device)
        if all(s.device == device and s.y.device == device for s in (self.train, self.val, self.test)):
            return self
        moved = {k: s.to(device) for k, s in (("train", self.train), ("val", self.val), ("test", self.test))}
        return dataclasses.replace(self, **moved)

    def summary(self) -> str:
        n = self.train.sizes
        lines = [
            f"{self.info.get('name', 'federation')}: {self.num_clients} clients, "
            f"{self.train.num_samples} train / {self.val.num_samples} val samples, "
            f"{_count(self.test.num_clients, 'test client')}, input {self.input_shape}, "
            f"{_count(self.num_classes, 'class', 'classes') if self.num_classes else 'regression'}, "
            f"{_count(self.num_concepts, 'concept')}",
            f"  samples per client: min {n.min()}, median {int(np.median(n))}, max {n.max()}",
            "  clients per concept: " + ", ".join(
                f"{c}:{int((self.true_cluster == c).sum())}" for c in range(self.num_concepts)
            ),
        ]
        return "\n".join(lines)

    def label_histogram(self) -> np.ndarray:
        """[clients, classes] counts of training labels (classification only)."""
        owner = self.train.owner()
        hist = np.zeros((self.num_clients, max(self.num_classes, 1)), dtype=np.int64)
        if self.task == "classification":
            np.add.at(hist, (owner, self.train.y.cpu().numpy()), 1)
        return hist

    def check_values(self) -> None:
        """Raise ValueError unless the data are usable: float inputs of one shape, finite; labels in
        0..num_classes-1 (classification) or finite (regression); ground-truth ids >= 0 (styles >= -1).
        A cache file can be rewritten with a fresh checksum, so what it holds is checked, not trusted."""
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task {self.task!r} is neither classification nor regression")
        if not isinstance(self.num_classes, int) or self.num_classes < (1 if self.task == "classification" else 0):
            raise ValueError(f"num_classes {self.num_classes!r} does not fit a {self.task} task")
        shape = tuple(self.train.local().x.shape[1:])
        label_dtype = torch.int64 if self.task == "classification" else torch.float32
        for name, s in (("train", self.train), ("val", self.val), ("test", self.test)):
            x = s.local().x  # the inputs this process holds (all of them but on a rank: data.sharded)
            if not (isinstance(x, torch.Tensor) and isinstance(s.y, torch.Tensor)) or x.dtype != torch.float32:
                raise ValueError(f"{name} inputs are not float32 tensors")
            if s.y.dtype != label_dtype:
                what = "labels" if label_dtype == torch.int64 else "targets"
                raise ValueError(f"{name} {what} are {str(s.y.dtype).removeprefix('torch.')}, not "
                                 f"{str(label_dtype).removeprefix('torch.')}")
            if tuple(x.shape[1:]) != shape or s.y.dim() != 1:
                raise ValueError(f"{name} inputs have shape {tuple(x.shape[1:])}, train {shape}")
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"{name} inputs hold non-finite values")
            if self.task == "classification":
                if s.y.is_floating_point() or (len(s.y) and not 0 <= int(s.y.min()) <= int(s.y.max())
                                               < self.num_classes):
                    raise ValueError(f"{name} labels lie outside 0..{self.num_classes - 1}")
            elif not (s.y.is_floating_point() and bool(torch.isfinite(s.y).all())):
                raise ValueError(f"{name} targets are not finite numbers")
        if self.num_classes > MAX_CLASSES:  # what is allocated per class (label counts per client and cluster)
            raise ValueError(f"num_classes is {self.num_classes}, past the {MAX_CLASSES} classes of any data set")
        # ids number concepts (or styles) that clients hold: fewer than the clients (and styles' names)
        most = self.num_clients + self.test.num_clients + len(self.style_names)
        concept = self.sample_concept if self.sample_concept is not None else np.zeros(0, dtype=np.int64)
        for name, ids, low in (("true_cluster", self.true_cluster, 0), ("test_cluster", self.test_cluster, 0),
                               ("style", np.asarray(self.style), -1), ("sample_concept", np.asarray(concept), 0)):
            if ids.dtype.kind not in "iu":
                raise ValueError(f"{name} holds {ids.dtype} values, not integer ids")
            if len(ids) and (ids.min() < low or ids.max() >= most):
                raise ValueError(f"{name} holds ids outside {low}..{most - 1}")
        if len(self.style) != self.num_clients:
            raise ValueError("style needs one entry per client")

    def check_fits(self, dataset: str, scenario: str, images: bool, classes: int | None = None) -> None:
        """Raise ValueError unless the federation is one of ``dataset`` and ``scenario`` (as its ``info`` records
        them), with images of (channels, height, width) when ``images`` (a data set of pictures), and the class
        count of a classification: the data set's ``classes`` where it has a fixed number (the labels of a few
        clients need not reach them all: FEMNIST's writers), else the one the labels reach (a larger count would
        be made up)."""
        for what, want in (("dataset", dataset), ("name", scenario)):
            got = self.info.get(what)
            if got is not None and got != want:
                raise ValueError(f"it holds {what if what == 'dataset' else 'scenario'} {got!r}, not {want!r}")
        if images and len(self.input_shape) != 3:
            raise ValueError(f"its inputs have shape {self.input_shape}, not the (channels, height, width) of images")
        if self.task == "classification":
            top = max((int(s.y.max()) for s in (self.train, self.val, self.test) if len(s.y)), default=-1)
            if classes is not None and self.num_classes != classes:
                raise ValueError(f"num_classes is {self.num_classes}; {dataset} has {classes} classes")
            if classes is None and top + 1 != self.num_classes:
                raise ValueError(f"num_classes is {self.num_classes} but the labels reach {top} only")

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path, key: str = "") -> None:
        """Write atomically as a checksummed state file (safetensors + JSON; see ``storage.state_file``)."""
        save_state(Path(path), self._state(), "federation", key,
                   hint="set FEDCLUSTER_CACHE to a folder with free space")

    @staticmethod
    def load(path: str | Path, key: str | None = None) -> Federation:
        """Read a file written by :meth:`save`; raises ``StateFileError`` if it is corrupt or of another key."""
        state = load_state(Path(path), "federation", key)
        try:
            for name in ("true_cluster", "test_cluster"):  # the constructor would cast them to int64
                if not (isinstance(state.get(name), np.ndarray) and state[name].dtype == np.int64):
                    raise ValueError(f"{name} is not an array of int64 ids")
            splits = {k: Split(**state.pop(k)) for k in ("train", "val", "test")}
            fed = Federation(**splits, **state)
            fed.check_values()
            return fed
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise StateFileError(Path(path), f"does not describe a federation ({e})") from None

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            k: {"x": s.x, "y": s.y, "ptr": s.ptr}
            for k, s in (("train", self.train), ("val", self.val), ("test", self.test))
        }
        state.update(
            true_cluster=self.true_cluster, test_cluster=self.test_cluster, num_classes=self.num_classes,
            task=self.task, sample_concept=self.sample_concept, style=self.style,
            style_names=self.style_names, extras=self.extras, info=self.info,
        )
        return state


def _count(n: int, one: str, many: str | None = None) -> str:
    """``1 concept``, ``3 concepts``."""
    return f"{n} {one if n == 1 else many or one + 's'}"
