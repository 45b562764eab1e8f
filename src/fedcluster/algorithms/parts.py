"""A method's tier parts are its base constructor's required arguments: a forgotten or wrong one fails at once."""

from __future__ import annotations

from typing import Any


def required(part: Any, kind: type, name: str) -> Any:
    """``part`` when it is a ``kind``; a TypeError naming the missing or wrong part otherwise."""
    if not isinstance(part, kind):
        raise TypeError(f"a clustered method needs its {name} part, a {kind.__name__}; got {part!r}")
    return part
