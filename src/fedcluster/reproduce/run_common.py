"""Shared pieces of the runners: one in-process Run from overrides, the device, reading a run's metrics."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from fedcluster.config.run_config import RunConfig, load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.data.federation import Federation
from fedcluster.engine.runner import Run
from fedcluster.errors import DivergedError, UserError

QUIET = ["progress=false"]
Record = dict[str, Any]  # {"seed", "setting", "method", "metrics": {key: value}, "curve": [[round, value]], ...}
Emit = Callable[[Record], None]


def device_overrides(device: str) -> tuple[str, list[str]]:
    """The device a run will use and the overrides that select it (a build without a device key runs on CPU)."""
    has_key = "device" in {f.name for f in dataclasses.fields(RunConfig)}
    if device == "auto":
        device = "cuda" if has_key and torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: PyTorch sees no CUDA device here; use --device cpu or auto")
    if has_key:
        return device, [f"device={device}"]
    if device != "cpu":
        raise UserError("--device cuda: this fedcluster build trains on the CPU only (no device key); "
                        "use --device cpu or auto")
    return "cpu", []


def config(overrides: Sequence[str]) -> tuple[RunConfig, dict[str, Any]]:
    return resolve(load_raw(None, [*overrides, *QUIET]))


def federation(overrides: Sequence[str]) -> Federation:
    """The federation a run with these overrides builds (algorithm keys are ignored)."""
    cfg, typed = config([o for o in overrides if not o.startswith(("algorithm=", "algorithm."))])
    return build_federation(cfg, typed["scenario"])


def make_run(overrides: Sequence[str], out: Path, fed: Federation | None = None) -> Run:
    cfg, typed = config([*overrides, f"out={out}", f"checkpoint_every={10**9}"])
    return Run(cfg, typed, fed=fed)


def first_round(rows: Sequence[dict[str, float]], key: str, value: float, tol: float = 1e-9) -> float:
    """First round whose ``key`` is ≥ ``value`` − tol (NaN if never), e.g. the round ARI reaches 1."""
    for r in rows:
        v = r.get(key, math.nan)
        if not math.isnan(v) and v >= value - tol:
            return r["round"]
    return math.nan


def at_round(rows: Sequence[dict[str, float]], key: str, round_: int) -> float:
    for r in rows:
        if int(r["round"]) == round_:
            return r.get(key, math.nan)
    return math.nan


def read_metrics(read: str, summary: dict[str, Any], rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """One run's numbers in the paper's reading: best-val or best-train (FedRC paper), best (HCFL paper: best
    val/test, K^T and max_t K^t) or final (CFL-GP paper)."""
    if read == "best-train":
        return at_best_train(rows)
    if read == "best-val":
        at = summary["at_best_val"]
        return {"local": 100 * at["val_acc"], "global": 100 * at["test_acc"], "ari": at["ari"],
                "kt": float(summary["final"]["num_clusters"])}
    if read == "best":
        best, final = summary["best"], summary["final"]
        kmax = max((r["num_clusters"] for r in rows if not math.isnan(r.get("num_clusters", math.nan))),
                   default=math.nan)
        return {"val": 100 * best["val_acc"]["value"], "test": 100 * best["test_acc"]["value"],
                "kt": float(final["num_clusters"]), "ari": final["ari"], "kmax": float(kmax)}
    if read == "final":
        final = summary["final"]
        return {"ari": final["ari"], "to_ari1": first_round(rows, "ari", 1.0), "acc": 100 * final["test_acc"],
                "val": 100 * final["val_acc"], "ari5": at_round(rows, "ari", 5)}
    raise ValueError(f"unknown reading {read!r}")


def best_train_round(rows: Sequence[dict[str, float]]) -> int:
    """The evaluated round of best mean training accuracy (the first such round on a tie); needs ``eval_train``."""
    scored = [r for r in rows if not math.isnan(r.get("train_acc", math.nan))]
    if not scored:
        raise ValueError("the best-train reading needs rounds with train_acc (run with eval_train=true)")
    return int(max(scored, key=lambda r: r["train_acc"])["round"])  # max keeps the first of equal values


def at_best_train(rows: Sequence[dict[str, float]], round_: int | None = None) -> dict[str, float]:
    """Local and global accuracy and ARI at the evaluated round of best mean training accuracy, as the FedRC paper
    reads its tables (``round_``: at that round instead, e.g. another run's best-train round), and the round."""
    at = best_train_round(rows) if round_ is None else round_
    best = next(r for r in rows if int(r["round"]) == at)
    return {"local": 100 * best["val_acc"], "global": 100 * best["test_acc"], "ari": best["ari"], "round": float(at)}


def curve(rows: Sequence[dict[str, float]], key: str) -> list[list[float]]:
    return [[r["round"], r[key]] for r in rows if key in r and not math.isnan(r[key])]


def diverged(seed: int, setting: str, method: str, exp: Any, error: DivergedError, seconds: float) -> Record:
    """The record of a run that diverged: every metric NaN (the mean skips it: "(n/N seeds)"), the reason kept."""
    return {"seed": seed, "setting": setting, "method": method, "metrics": {m.key: math.nan for m in exp.metrics},
            "curve": [], "seconds": seconds, "diverged": str(error).split(";")[0]}
