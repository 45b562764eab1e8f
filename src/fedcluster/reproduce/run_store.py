"""One store of finished runs that every reproduction (and any later call) reads instead of training again.

A run is stored under a key made from everything that decides its result: the resolved run configuration (every
key but those that only say where or how fast it runs: ``out``, ``progress``, checkpoints, tracking, the engine,
workers, threads and ranks, which give the same numbers), a digest of the federation it trained on (every sample,
label, split and ground truth, so that another data file, shrink or merge is another run) and
:data:`RESULT_VERSION`, raised whenever a change of fedcluster changes any run's numbers (or, when only one
method's numbers change, that method's entry in :data:`METHOD_VERSIONS`). Two experiments whose
runs resolve to the same configuration on the same federation share one stored run.

The thread count is not part of the key: on the CPU another count may round a few last bits differently, and the
store treats such runs as the same run.

A stored run is plain JSON (``STORE/KEY[:2]/KEY.json``; never a pickle): the summary's final, best and
best-validation figures and every rounds.csv column but the time, by column (NaN as null). Reading one back
checks its shape and refuses anything else in one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedcluster.errors import UserError

if TYPE_CHECKING:
    from fedcluster.config.run_config import RunConfig
    from fedcluster.data.federation import Federation

RESULT_VERSION = 1  # raise it with any change that alters a run's numbers (a new key then trains afresh)
# a method's own version, raised with a change that alters only that method's runs (its runs then train afresh,
# every other key stays as it was); a method not named here is at version 1
METHOD_VERSIONS: dict[str, int] = {
    "clove": 2,  # one k-means++ start a round, as the CLoVE authors' code (was ten)
}
# keys that decide where or how fast a run goes, never its numbers (the engines give the same rounds.csv)
NOT_RESULT_KEYS = frozenset({"out", "progress", "checkpoint_every", "tracking", "tracking_uri", "tracking_experiment",
                             "tensorboard_dir", "engine", "workers", "threads", "ranks", "chunk_mb"})
SUMMARY_PARTS = ("final", "best", "at_best_val", "max_clusters")
DROPPED_COLUMNS = ("seconds",)
MAX_ROWS = 100_000  # more rounds than any run has
MAX_FILE_BYTES = 64 * 2**20


@dataclass
class StoredRun:
    """One finished run: its key, its summary's figures and its rounds (numbers; NaN where a round has none)."""

    key: str
    summary: dict[str, Any]
    rows: list[dict[str, float]]
    seconds: float  # the wall time it took to train

    def to_json(self) -> dict[str, Any]:
        columns = list(dict.fromkeys(k for r in self.rows for k in r))
        return {"key": self.key, "version": RESULT_VERSION, "seconds": self.seconds,
                "summary": {part: _nulls(v) for part, v in self.summary.items()},
                "rounds": {c: [_plain(r.get(c, math.nan)) for r in self.rows] for c in columns}}


def _plain(v: float) -> float | None:
    return None if math.isnan(v) else v


def _nulls(value: Any) -> Any:
    """``value`` with every NaN as None (strict JSON)."""
    if isinstance(value, dict):
        return {k: _nulls(v) for k, v in value.items()}
    return None if isinstance(value, float) and math.isnan(value) else value


def federation_digest(fed: Federation) -> str:
    """A digest of every array of ``fed`` (samples, labels, client offsets, fit masks, ground truth, extras) and its
    class count and task: two federations with the same digest train the same runs."""
    import torch

    h = hashlib.blake2b(digest_size=16)

    def add(name: str, value: Any) -> None:
        h.update(name.encode())
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().contiguous().numpy()
        if isinstance(value, np.ndarray):
            h.update(f"{value.dtype}{value.shape}".encode())
            h.update(np.ascontiguousarray(value).tobytes())
        else:
            h.update(json.dumps(value, sort_keys=True, default=str).encode())

    for split in ("train", "val", "test"):
        s = getattr(fed, split)
        for f in ("x", "y", "ptr", "fit"):
            add(f"{split}.{f}", getattr(s, f))
    for f in ("true_cluster", "test_cluster", "sample_concept", "style", "num_classes", "task", "style_names"):
        add(f, getattr(fed, f))
    for name in sorted(fed.extras):
        add(f"extras.{name}", fed.extras[name])
    return h.hexdigest()


def run_key(cfg: RunConfig, federation: str) -> str:
    """The store key of a run of ``cfg`` on the federation whose :func:`federation_digest` is ``federation``."""
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in NOT_RESULT_KEYS}
    versions = {"v": RESULT_VERSION, **method_version(cfg.algorithm)}
    text = json.dumps({**versions, "config": settings, "federation": federation}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def method_version(algorithm: str) -> dict[str, int]:
    """The key entry of ``algorithm``'s own version: none at version 1 (so that its keys stay as they were)."""
    version = METHOD_VERSIONS.get(algorithm, 1)
    return {} if version == 1 else {"method_v": version}


class RunStore:
    """The folder of stored runs (:class:`StoredRun`), each written atomically once it has finished."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> StoredRun | None:
        """The stored run of ``key``; None when there is none. A file that is not a stored run is refused."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise ValueError(f"larger than {MAX_FILE_BYTES >> 20} MB")
            return _checked(json.loads(path.read_text(encoding="utf-8")), key)
        except (ValueError, TypeError, RecursionError, OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())[:160]
            raise UserError(f"the stored run {str(path)!r} is unusable ({why}): move it aside (or delete it) and "
                            "the run is trained again") from None

    def put(self, run: StoredRun) -> Path:
        """Store ``run`` (atomically: a crash mid-write leaves no half file)."""
        path = self.path(run.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(run.to_json(), separators=(",", ":"), allow_nan=False), encoding="utf-8")
        os.replace(tmp, path)
        return path

    def keys(self) -> set[str]:
        return {p.stem for p in self.root.glob("*/*.json")}


def from_run(key: str, summary: dict[str, Any], rows: Sequence[dict[str, float]], seconds: float) -> StoredRun:
    """The stored form of a run just finished: the summary's figures and its rounds without the time columns."""
    kept = {k: summary[k] for k in SUMMARY_PARTS if k in summary}
    return StoredRun(key, _summary_checked(json.loads(json.dumps(_nulls(kept)))),
                     [{k: float(v) for k, v in r.items() if k not in DROPPED_COLUMNS} for r in rows], seconds)


def _number(v: Any, where: str) -> float:
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{where} is not a number")
    return float(v)


def _checked(data: Any, key: str) -> StoredRun:
    """The :class:`StoredRun` ``data`` describes, if it is what :meth:`RunStore.put` writes (else ValueError)."""
    if not isinstance(data, dict) or set(data) != {"key", "version", "seconds", "summary", "rounds"}:
        raise ValueError("not a stored run (key, version, seconds, summary, rounds)")
    if data["key"] != key:
        raise ValueError(f"it holds the run {str(data['key'])[:40]!r}, not {key!r}")
    if data["version"] != RESULT_VERSION:
        raise ValueError(f"result version {str(data['version'])[:10]}, not {RESULT_VERSION}")
    seconds = _number(data["seconds"], "seconds")
    summary = _summary_checked(data["summary"])
    rounds = data["rounds"]
    if not isinstance(rounds, dict) or "round" not in rounds or not all(
            isinstance(c, str) and isinstance(v, list) for c, v in rounds.items()):
        raise ValueError("its rounds are not columns of numbers with a round column")
    lengths = {len(v) for v in rounds.values()}
    if len(lengths) != 1 or lengths.pop() > MAX_ROWS:
        raise ValueError("its round columns differ in length (or are absurdly long)")
    n = len(rounds["round"])
    rows = [{c: _number(v[i], f"rounds.{c}[{i}]") for c, v in rounds.items()} for i in range(n)]
    return StoredRun(key, summary, rows, seconds)


def _summary_checked(summary: Any) -> dict[str, Any]:
    """A run's summary figures as :func:`from_run` keeps them (None read as NaN), else ValueError: final and
    at_best_val map names to numbers, best maps names to a value and its round, max_clusters is a number."""
    if not isinstance(summary, dict) or not set(summary) <= set(SUMMARY_PARTS):
        raise ValueError("its summary is not a run's final, best and best-validation figures")
    out: dict[str, Any] = {}
    for part, value in summary.items():
        if part == "max_clusters":
            out[part] = _number(value, part)
            continue
        if not isinstance(value, dict):
            raise ValueError(f"summary.{part} is not a table of figures")
        if part == "best":
            if not all(isinstance(v, dict) and set(v) == {"value", "round"} for v in value.values()):
                raise ValueError("summary.best does not give a value and a round for every figure")
            out[part] = {k: {f: _number(x, f"summary.best.{k}") for f, x in v.items()} for k, v in value.items()}
        else:
            out[part] = {k: _number(v, f"summary.{part}.{k}") for k, v in value.items()}
    return out
