"""Turning sub-claims into a verdict.

Each check compares a number with a bound. A plain number passes or fails. A :class:`Paired` difference (the same
seed's federation for both sides) passes when its whole ±2-standard-error interval meets the bound, fails when the
whole interval misses it, and is a "tie" otherwise: a lead smaller than the seed-to-seed noise is neither a win nor
a loss. A check the run cannot test (e.g. a method that never split, so a claim about its clusters holds vacuously)
is "not tested".

The verdict: the first (headline) check fails → "does not hold"; it ties → "tie"; it cannot be tested → "not
tested"; it passes → "holds" when every other testable check passes, else "partly".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Z = 2.0  # standard errors either side of a paired mean that count as seed noise

Check = tuple[str, "float | Paired", float, str]  # (what, ours, bound, "<=" | ">=" | "not tested: why")
STATUSES = ("holds", "partly", "tie", "does not hold", "not tested")


@dataclass(frozen=True)
class Paired:
    """The mean over seeds of a paired difference and its standard error (NaN with fewer than 2 pairs)."""

    mean: float
    se: float = math.nan

    @property
    def low(self) -> float:
        return self.mean - Z * self.se

    @property
    def high(self) -> float:
        return self.mean + Z * self.se


def not_tested(what: str, why: str) -> Check:
    """A check the run cannot test, with the reason (shown in the verdict's text)."""
    return (what, math.nan, math.nan, f"not tested: {why}")


def outcome(ours: float | Paired, bound: float, op: str) -> str:
    """"pass", "fail", "tie" (a paired difference within 2 standard errors of the bound) or "not tested"."""
    if op.startswith("not tested"):
        return "not tested"
    if isinstance(ours, Paired):
        if math.isnan(ours.mean):
            return "fail"
        if math.isnan(ours.se):  # one seed: no noise estimate, the mean decides
            return outcome(ours.mean, bound, op)
        good, bad = (ours.low >= bound, ours.high < bound) if op == ">=" else (ours.high <= bound, ours.low > bound)
        return "pass" if good else "fail" if bad else "tie"
    if math.isnan(ours):
        return "fail"  # the cell was not measured
    return "pass" if (ours <= bound if op == "<=" else ours >= bound) else "fail"


_WORD = {"pass": "meets", "fail": "misses", "tie": "ties (within 2 SE)"}


def _text(what: str, ours: float | Paired, bound: float, op: str, result: str) -> str:
    if result == "not tested":
        return f"{what}: not tested ({op.split(':', 1)[1].strip()})"
    value = (f"{ours.mean:.3g} ± {Z * ours.se:.2g} (2 SE)" if isinstance(ours, Paired) and not math.isnan(ours.se)
             else f"{ours.mean if isinstance(ours, Paired) else ours:.3g}")
    return f"{what}: {value} {_WORD[result]} {op} {bound:g}"


def judge(checks: Sequence[Check]) -> tuple[str, str]:
    """``checks``: (what, ours, bound, op) in order of importance; the first is the headline claim."""
    results = [outcome(ours, bound, op) for _, ours, bound, op in checks]
    why = "; ".join(_text(*c, r) for c, r in zip(checks, results, strict=True))
    head = results[0] if results else "not tested"
    if head != "pass":
        return {"fail": "does not hold", "tie": "tie", "not tested": "not tested"}[head], why
    rest = [r for r in results[1:] if r != "not tested"]
    return ("holds" if all(r == "pass" for r in rest) else "partly"), why


def worst(values: Iterable[Paired], bound: float, op: str = ">=") -> Paired:
    """The value that fares worst against the bound (a failure before a tie before a pass; then the lowest mean
    for ">=", the highest for "<="): the claim holds at every setting only if it holds there. NaN if none."""
    rank = {"fail": 0, "tie": 1, "pass": 2}
    xs = list(values)
    if not xs:
        return Paired(math.nan)
    sign = 1.0 if op == ">=" else -1.0
    return min(xs, key=lambda p: (rank[outcome(p, bound, op)], sign * (p.mean if not math.isnan(p.mean) else -1e300)))


def top(values: Iterable[float], default: float = math.nan) -> float:
    """The largest finite value (``default`` if none): a missing cell never wins or hides the others."""
    xs = [v for v in values if not math.isnan(v)]
    return max(xs) if xs else default


def bottom(values: Iterable[float], default: float = math.nan) -> float:
    """The smallest finite value (``default`` if none)."""
    xs = [v for v in values if not math.isnan(v)]
    return min(xs) if xs else default
