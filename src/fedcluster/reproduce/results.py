"""A reproduction's stored results (``NAME.json`` beside ``NAME.md``): per-seed records, written after every run."""

from __future__ import annotations

import ast
import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedcluster.errors import UserError
from fedcluster.reproduce.spec import BUDGETS, Results


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
    # Experiment.protocol of the runs (older files: the budget's repr), so that records made under another protocol
    # are never mixed with new ones
    spec: str = ""

    def matches(self, budget: str, device: str, extra: list[str], protocol: str, budget_repr: str) -> bool:
        """Whether these records can be continued by a run with this budget, device, extra overrides and
        protocol. Records of an older file, which stored only the budget's repr, match when the budget's numbers
        and overrides are the same (its words may differ)."""
        if (self.budget, self.device, self.extra) != (budget, device, extra):
            return False
        if self.spec in ("", protocol):
            return True
        return not self.spec.startswith("protocol ") and _budget_fields(self.spec) == _budget_fields(budget_repr)

    def stale(self, protocol: str) -> bool:
        """Whether these records were run under another protocol than ``protocol`` (the experiment's now): judging
        them as its runs would describe runs that did not happen. Older files store only the budget's repr and
        cannot be told apart."""
        return self.spec.startswith("protocol ") and self.spec != protocol

    def keys(self) -> set[tuple[int, str, str]]:
        """The (seed, setting, method) of every stored record."""
        return {(r["seed"], r["setting"], r["method"]) for r in self.records}

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
        """The stored results at ``path``, None if there are none; a file that is not what :meth:`save` writes
        (a folder in its place, deep or foreign JSON, wrong types, an unknown budget, absurd sizes) is refused in
        one line naming it."""
        if not path.exists() and not path.is_symlink():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Stored(**_checked(data))
        except (ValueError, TypeError, RecursionError, OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())[:160]
            raise UserError(f"the stored results {str(path)!r} are unusable ({why}): move the file aside (or delete "
                            "it) to run this reproduction afresh") from None


def _budget_fields(text: str) -> dict[str, Any] | None:
    """The numbers and overrides of a ``Budget(...)`` repr, read as literals only (no code runs); None if it is not
    one."""
    if len(text) > 10_000:  # no budget repr is this long; a crafted one never reaches the parser
        return None
    try:
        call = ast.parse(text, mode="eval").body
        if not isinstance(call, ast.Call):
            return None
        fields = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg not in ("model", "note")}
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return fields or None


MAX_SEEDS = 1000  # more seeds than any reproduction runs
RECORD_KEYS = {"seed": int, "setting": str, "method": str, "metrics": dict}


def _checked(data: Any) -> dict[str, Any]:
    """``data`` if it is what :meth:`Stored.save` writes; else a ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    types = {"name": str, "budget": str, "seeds": int, "device": str, "extra": list, "records": list,
             "finished": bool, "wall_seconds": int | float, "date": str, "spec": str}
    for key, value in data.items():
        if key not in types:
            raise ValueError(f"unknown entry {key!r}")
        if not isinstance(value, types[key]) or (isinstance(value, bool) and types[key] is not bool):
            raise ValueError(f"{key} is a {type(value).__name__}")
    if data.get("budget") not in (*BUDGETS, "tiny"):
        raise ValueError(f"budget {str(data.get('budget'))[:20]!r} is none of {', '.join(BUDGETS)}")
    if not 1 <= data.get("seeds", 0) <= MAX_SEEDS:
        raise ValueError(f"seeds={data.get('seeds')} is outside 1..{MAX_SEEDS}")
    wall = data.get("wall_seconds", 0.0)
    if not (math.isfinite(wall) and wall >= 0):
        raise ValueError(f"wall_seconds={wall} is not a duration")
    if not all(isinstance(e, str) for e in data.get("extra", [])):
        raise ValueError("extra holds something other than key=value texts")
    for i, r in enumerate(data.get("records", [])):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), t) and not isinstance(r.get(k), bool)
                                              for k, t in RECORD_KEYS.items()):
            raise ValueError(f"record {i} is not a seed, setting, method and metrics")
        if not 0 <= r["seed"] < MAX_SEEDS or not all(
                isinstance(k, str) and (v is None or (isinstance(v, int | float) and not isinstance(v, bool)))
                for k, v in r["metrics"].items()):
            raise ValueError(f"record {i} has a seed outside 0..{MAX_SEEDS - 1} or metrics that are not numbers")
    return data
