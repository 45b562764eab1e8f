"""The figures of one stored run, as the benchmark reads it: the final round's global accuracy (the new test
clients of each concept), local accuracy (each client's own validation data), ARI against the true clusters and
number of clusters, the first round with ARI ≥ 0.9, the bytes each participating client sent a round, and on a
regression task the test mean squared error and, where the method reports it, the estimation error of θ*."""

from __future__ import annotations

import math

from fedcluster.reproduce.run_common import first_round
from fedcluster.reproduce.run_store import StoredRun

ARI_REACHED = 0.9


def _final(stored: StoredRun, key: str) -> float:
    value = stored.summary.get("final", {}).get(key, math.nan)
    return math.nan if value is None else float(value)


def figures(stored: StoredRun, clients: int) -> dict[str, float]:
    """The benchmark's figures of ``stored``, a run of ``clients`` clients all taking part in every round."""
    rows = stored.rows
    ups = [r["bytes_up"] for r in rows if not math.isnan(r.get("bytes_up", math.nan))]
    last = rows[-1] if rows else {}
    return {"global": 100 * _final(stored, "test_acc"), "local": 100 * _final(stored, "val_acc"),
            "ari": _final(stored, "ari"), "k": _final(stored, "num_clusters"),
            "to_ari": first_round(rows, "ari", ARI_REACHED), "seconds": stored.seconds,
            "bytes": math.fsum(ups) / len(ups) / clients if ups else math.nan,
            "mse": _final(stored, "test_loss"), "est_error": float(last.get("param_error", math.nan))}
