"""The YAML dialect of config files and ``key=value`` values: YAML 1.1 without its surprises.

``yaml.safe_load`` reads YAML 1.1, where ``1:0`` is the sexagesimal number 60, ``0777`` is octal 511 and
``1e-3`` is a string, and where a key given twice silently keeps its last value. Config files are written
by hand, so :func:`load_yaml` reads numbers as a person means them — decimal integers (leading zeros
allowed, with a note), ``0x`` hexadecimal, floats with or without a dot (``1e-3``) — leaves ``1:0`` a
string (the key's type check then refuses it), and refuses a key given twice, an integer of more digits
than Python converts, and nesting deeper than Python's recursion allows, each with one line.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from fedcluster.errors import ConfigError

_INT = re.compile(r"^(?:[-+]?[0-9][0-9_]*|[-+]?0x[0-9a-fA-F_]+)$")
_FLOAT = re.compile(r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
MAX_INT_DIGITS = 4000  # Python refuses int() of more than 4300 digits; any config integer is far shorter


class ConfigLoader(yaml.SafeLoader):
    """SafeLoader with the number rules above and duplicate keys refused."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: SafeLoader reports it
                continue
            if duplicate:
                line = key_node.start_mark.line + 1
                raise ConfigError(f"key {key!r} is given twice (again on line {line}); keep one of them")
        return super().construct_mapping(node, deep)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.lstrip("+"))
    if digits.lower().startswith("0x"):
        return sign * int(digits[2:], 16)
    if len(digits) > MAX_INT_DIGITS:
        raise ConfigError(f"an integer of {len(digits)} digits (line {node.start_mark.line + 1}) is far too large "
                          "for any setting; give a number of a few digits")
    if len(digits) > 1 and digits.startswith("0"):
        from fedcluster.config.notes import note

        note(f"{text} (line {node.start_mark.line + 1}) is read as the decimal {sign * int(digits)}, not as an "
             "octal number")
    return sign * int(digits)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).replace("_", "")
    lowered = text.lower()
    if lowered.endswith((".inf", ".nan")):
        return float(lowered.replace(".", ""))
    return float(text)


ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in ("tag:yaml.org,2002:int",
                                                                     "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
ConfigLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
ConfigLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def load_yaml(text: str) -> Any:
    """Parse ``text`` (raises ``yaml.YAMLError`` for broken YAML, :class:`ConfigError` for the cases above)."""
    try:
        return yaml.load(text, Loader=ConfigLoader)  # noqa: S506 (ConfigLoader is a SafeLoader)
    except RecursionError:
        raise ConfigError("the YAML nests lists or mappings too deeply; write the values out plainly") from None
