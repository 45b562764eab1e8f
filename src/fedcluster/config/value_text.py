"""How a configuration value is written on the command line and in YAML: ``null``, ``true``, ``[a,b]``."""

from __future__ import annotations

from typing import Any


def value_text(value: Any) -> str:
    """A value as it is written on the command line: null, true, [a,b], {a: 1}, 0.1."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ",".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {value_text(v)}" for k, v in value.items()) + "}"
    return str(value)
