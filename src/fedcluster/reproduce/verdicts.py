"""Turning sub-claims into a verdict: every check holds → "holds"; the first (main) one → "partly"."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def judge(checks: Sequence[tuple[str, float, float, str]]) -> tuple[str, str]:
    """``checks``: (what, ours, bound, "<=" | ">=") in order of importance; the first is the headline claim.

    A check with a NaN value counts as failed (the cell was not measured).
    """
    results = []
    for what, ours, bound, op in checks:
        ok = not math.isnan(ours) and (ours <= bound if op == "<=" else ours >= bound)
        results.append((what, ok, ours, bound, op))
    why = "; ".join(f"{w}: {o:.3g} {'meets' if ok else 'misses'} {op} {b:g}" for w, ok, o, b, op in results)
    if all(ok for _, ok, *_ in results):
        return "holds", why
    if results and results[0][1]:
        return "partly", why
    return "does not hold", why


def top(values: Iterable[float], default: float = math.nan) -> float:
    """The largest finite value (``default`` if none): a missing cell never wins or hides the others."""
    xs = [v for v in values if not math.isnan(v)]
    return max(xs) if xs else default


def bottom(values: Iterable[float], default: float = math.nan) -> float:
    """The smallest finite value (``default`` if none)."""
    xs = [v for v in values if not math.isnan(v)]
    return min(xs) if xs else default
