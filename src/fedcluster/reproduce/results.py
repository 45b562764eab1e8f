"""A reproduction's stored results (``NAME.json`` beside ``NAME.md``): per-seed records, written after every run."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedcluster.reproduce.spec import Results


@dataclass
class Stored:
    """What one ``fedcluster reproduce NAME`` run produced so far."""

    name: str
    budget: str
    seeds: int
    device: str
    extra: list[str]
    records: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    wall_seconds: float = 0.0
    date: str = ""
    spec: str = ""  # the budget's full definition (repr), so that a changed budget is never mixed with old records

    def matches(self, budget: str, device: str, extra: list[str], spec: str) -> bool:
        """Whether these records can be continued by a run with this budget, device and extra overrides."""
        return (self.budget, self.device, self.extra) == (budget, device, extra) and self.spec in ("", spec)

    def done(self, seed: int) -> set[tuple[str, str]]:
        return {(r["setting"], r["method"]) for r in self.records if r["seed"] == seed}

    def results(self) -> Results:
        """(setting, method) -> metric -> values over the seeds < ``seeds`` (seed order)."""
        out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in sorted(self.records, key=lambda r: r["seed"]):
            if r["seed"] < self.seeds:
                for k, v in r["metrics"].items():
                    out[(r["setting"], r["method"])][k].append(math.nan if v is None else float(v))
        return {k: dict(v) for k, v in out.items()}

    def save(self, path: Path) -> None:
        """Atomically (a crash mid-write keeps the previous file)."""
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.__dict__, separators=(",", ":"), allow_nan=True))
        os.replace(tmp, path)

    def move_aside(self, path: Path, when: str) -> Path:
        """Rename ``path`` to ``NAME.previous-BUDGET-WHEN.json`` (``-2``, ``-3``, ... when taken) and return it:
        earlier results are never overwritten, even by two moves within one second."""
        n = 1
        while True:
            kept = path.with_name(f"{self.name}.previous-{self.budget}-{when}{'' if n == 1 else f'-{n}'}.json")
            try:
                os.close(os.open(kept, os.O_CREAT | os.O_EXCL))  # claims the name; fails if it exists
            except FileExistsError:
                n += 1
                continue
            os.replace(path, kept)
            return kept

    @staticmethod
    def load(path: Path) -> Stored | None:
        if not path.is_file():
            return None
        try:
            return Stored(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None
