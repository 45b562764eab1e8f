"""The benchmark's records, kept between calls in ``records.json`` (plain JSON, never a pickle): one per (scenario,
method, seed) under the key of everything that decides that cell (:func:`~fedcluster.benchmark.plan.pair_key`),
so that another selection of methods or scenarios reuses the cells it shares and a changed setting is run afresh.
A run's own numbers live in the run store; a record holds the figures read from it, or why there are none (n/a,
diverged, failed)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from fedcluster.errors import UserError

MAX_BYTES = 64 * 2**20
STATUSES = ("ok", "n/a", "diverged", "failed")
KEPT = ("ok", "n/a", "diverged")  # a failed cell is tried again by the next call


def _nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _nulls(v) for k, v in value.items()}
    return None if isinstance(value, float) and math.isnan(value) else value


def _nans(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (math.nan if v is None and k != "reason" else _nans(v)) for k, v in value.items()}
    return value


class Records:
    """(pair key, seed) -> record, read from and written to one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cells: dict[tuple[str, int], dict[str, Any]] = {}

    @staticmethod
    def load(path: Path) -> Records:
        found = Records(path)
        if not path.exists():
            return found
        try:
            if path.stat().st_size > MAX_BYTES:
                raise ValueError("too large")
            data = json.loads(path.read_text(encoding="utf-8"))
            for r in data["records"]:
                if not isinstance(r, dict) or r.get("status") not in STATUSES:
                    raise ValueError("a record without a known status")
                found.cells[(str(r["pair"]), int(r["seed"]))] = _nans(r)
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise UserError(f"{path} is not a benchmark's records file ({' '.join(str(e).split())[:120]}): move it "
                            "aside and the runs are read back from the run store") from None
        return found

    def add(self, record: dict[str, Any]) -> None:
        kept = {k: v for k, v in record.items() if k != "reused"}
        self.cells[(record["pair"], int(record["seed"]))] = kept

    def get(self, pair: str, seed: int) -> dict[str, Any] | None:
        return self.cells.get((pair, seed))

    def done(self, pair: str, seed: int) -> bool:
        r = self.get(pair, seed)
        return r is not None and r["status"] in KEPT

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ordered = [_nulls(self.cells[k]) for k in sorted(self.cells)]
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"records": ordered}, indent=0, sort_keys=True, allow_nan=False) + "\n",
                       encoding="utf-8")
        os.replace(tmp, self.path)
