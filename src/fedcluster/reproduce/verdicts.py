"""Turning sub-claims into a verdict.

Each check compares a number with a bound. A plain number passes or fails. A :class:`Paired` difference (the same
seed's federation for both sides) passes when its whole ±2-standard-error interval meets the bound, fails when the
whole interval misses it, and is a "tie" otherwise: a lead smaller than the seed-to-seed noise is neither a win nor
a loss. A check the run cannot test (e.g. a method that never split, so a claim about its clusters holds vacuously)
is "not tested".

The status follows every check that encodes one of the paper's sentences (a check marked :func:`from_table`, a
number an entry adds from the paper's table, is shown but decides nothing); the first is the headline:

- "holds": the headline and every other testable check meet their bounds;
- "does not hold": the headline misses, or some check misses and none meets its bound;
- "partly": some check misses and another meets its bound; or none misses, the headline meets its bound and
  another ties;
- "tie": no check misses and the headline ties;
- "not tested": no check misses and the headline cannot be tested.

So a clear miss anywhere is never hidden behind a headline tie.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Z = 2.0  # standard errors either side of a paired mean that count as seed noise

# (what, ours, bound, op): op is "<=" | ">=" | "not tested: why", or either comparison prefixed by TABLE
Check = tuple[str, "float | Paired", float, str]
TABLE = "table "  # the op prefix of a check an entry adds from the paper's table (shown, decides nothing)
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


def upper(p: Paired) -> float:
    """The mean + 2 standard errors (the mean alone with one seed: no noise estimate, the mean decides)."""
    return p.mean if math.isnan(p.se) else p.high


def not_tested(what: str, why: str) -> Check:
    """A check the run cannot test, with the reason (shown in the verdict's text)."""
    return (what, math.nan, math.nan, f"not tested: {why}")


def from_table(what: str, ours: float | Paired, bound: float, op: str) -> Check:
    """A check an entry adds from the paper's table rather than its text: shown with its outcome, never deciding the
    status."""
    return (f"{what} [from the paper's table, not its text: does not decide the status]", ours, bound, TABLE + op)


def outcome(ours: float | Paired, bound: float, op: str) -> str:
    """"pass", "fail", "tie" (a paired difference within 2 standard errors of the bound) or "not tested"."""
    op = op.removeprefix(TABLE)
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
    op = op.removeprefix(TABLE)
    if result == "not tested":
        return f"{what}: not tested ({op.split(':', 1)[1].strip()})"
    value = (f"{ours.mean:.3g} ± {Z * ours.se:.2g} (2 SE)" if isinstance(ours, Paired) and not math.isnan(ours.se)
             else f"{ours.mean if isinstance(ours, Paired) else ours:.3g}")
    return f"{what}: {value} {_WORD[result]} {op} {bound:g}"


def status_of(results: Sequence[str]) -> str:
    """The status of the deciding checks' outcomes, the headline first (the rules in this module's docstring)."""
    head = results[0] if results else "not tested"
    if "fail" in results:
        return "partly" if head != "fail" and "pass" in results else "does not hold"
    if head == "pass":
        return "holds" if all(r in ("pass", "not tested") for r in results) else "partly"
    return head if head == "tie" else "not tested"


def judge(checks: Sequence[Check]) -> tuple[str, str]:
    """``checks``: (what, ours, bound, op) in the paper's order; the first is the headline claim. Checks made with
    :func:`from_table` are reported but do not decide the status."""
    results = [outcome(ours, bound, op) for _, ours, bound, op in checks]
    why = "; ".join(_text(*c, r) for c, r in zip(checks, results, strict=True))
    deciding = [r for c, r in zip(checks, results, strict=True) if not c[3].startswith(TABLE)]
    return status_of(deciding), why


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
