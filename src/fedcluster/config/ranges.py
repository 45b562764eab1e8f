"""Allowed ranges of parameters, declared on the field and checked in one place.

A parameter dataclass declares a field's range with its default, ``tol1: float = ranged(0.4, ">= 0")``, and derives
from :class:`RangeChecked`, whose ``__post_init__`` checks every declared range (a field that is ``None`` is
unset and passes). A value out of range is a ``ValueError`` of one line naming the key, its range and the value,
which the configuration turns into a one-line error. Ranges: ``">= a"``, ``"> a"``, ``"<= b"``, ``"< b"``,
``"[a, b]"`` (any bracket open or closed), ``"a..b"`` (whole numbers from a to b) and ``"== a"``.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_NUMBER = r"-?[\d.]+(?:e-?\d+)?"
_COMPARE = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq}


@dataclass(frozen=True)
class Range:
    """A parsed range: the tests a value must pass and how the message names the range."""

    spec: str
    tests: tuple[tuple[Callable[[Any, Any], bool], float], ...]
    hint: str = ""

    def holds(self, value: Any) -> bool:
        return all(test(value, bound) for test, bound in self.tests)

    def message(self, key: str, value: Any) -> str:
        text = self.spec.removeprefix("== ") if self.spec.startswith("==") else (
            self.spec if self.spec[0] in "<>" else f"in {self.spec}")
        hint = f" ({self.hint})" if self.hint else ""
        return f"{key} must be {text}{hint}, got {value!r}"


def parse_range(spec: str, hint: str = "") -> Range:
    """The :class:`Range` of ``spec`` (see the module's list); an unknown form is a programming error."""
    if m := re.fullmatch(rf"(>=|>|<=|<|==) ({_NUMBER})", spec):
        return Range(spec, ((_COMPARE[m[1]], float(m[2])),), hint)
    if m := re.fullmatch(rf"([\[(])({_NUMBER}), ({_NUMBER})([\])])", spec):
        low = operator.ge if m[1] == "[" else operator.gt
        high = operator.le if m[4] == "]" else operator.lt
        return Range(spec, ((low, float(m[2])), (high, float(m[3]))), hint)
    if m := re.fullmatch(rf"({_NUMBER})\.\.({_NUMBER})", spec):
        return Range(spec, ((operator.ge, float(m[1])), (operator.le, float(m[2]))), hint)
    raise ValueError(f"unknown range {spec!r}")


def ranged(default: Any, spec: str, hint: str = "") -> Any:
    """A dataclass field with ``default`` whose value must lie in the range ``spec`` (``hint``: what a special
    value means or how to fix a wrong one, said in the message)."""
    return dataclasses.field(default=default, metadata={"range": parse_range(spec, hint)})


def check_ranges(params: Any) -> None:
    """Raise a one-line ``ValueError`` for the first field of ``params`` outside its declared range."""
    for f in dataclasses.fields(params):
        allowed: Range | None = f.metadata.get("range")
        value = getattr(params, f.name)
        if allowed is not None and value is not None and not allowed.holds(value):
            raise ValueError(allowed.message(f.name, value))


class RangeChecked:
    """Base of a parameter dataclass whose fields declare their ranges with :func:`ranged`; a subclass with a rule
    across fields extends ``__post_init__`` and calls this one first."""

    def __post_init__(self) -> None:
        check_ranges(self)
