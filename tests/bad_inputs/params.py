"""Every registered method's, scenario's and model's parameters given values of the wrong kind: text for a
number, a flag or a choice; a whole number past any bound; a rate past float32; an unknown key per entry. The
entries and their fields are read from the registries, so a new method is tried here too."""

from __future__ import annotations

import dataclasses
import typing

from fedcluster.catalog.registry import ALGORITHMS, MODELS, SCENARIOS
from tests.bad_inputs.core import RUN, Case

SECTIONS = (("algorithm", ALGORITHMS), ("scenario", SCENARIOS), ("model", MODELS))
NEEDS = {  # what an entry needs to be reached at all (its data set)
    ("scenario", "mixed-regression"): ["dataset=mixed-regression", "model=linear-nobias"],
    ("scenario", "cflgp-lines"): ["dataset=cflgp-lines", "model=linear"],
    ("scenario", "natural"): ["dataset=femnist"],
    ("scenario", "stream-drift"): ["dataset=airline"],
}


def _bad_values(annotation: object, section: str) -> list[tuple[str, str]]:
    """(label, value) pairs that no field of this type takes."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is bool:
        return [("a flag given as text", "maybe")]
    if origin is typing.Literal:
        return [("an unknown choice", "no-such-choice")]
    if annotation is int or (args and int in args and bool not in args):
        return [("text for a whole number", "many"), ("a whole number of 10^15", "1000000000000000")]
    if annotation is float or (args and float in args):
        out = [("text for a number", "fast")]
        return out + [("a number past float32", "1e300")] if section in ("algorithm", "model") else out
    if origin is list:
        return [("text for a list", "x")]
    return []


def param_cases() -> list[Case]:
    cases: list[Case] = []
    for section, registry in SECTIONS:
        for entry in registry:
            base = [*RUN, f"{section}={entry.name}", *NEEDS.get((section, entry.name), [])]
            cases.append(Case("parameters", f"{section}={entry.name} an unknown key",
                              lambda d, b=base, s=section: [*b, f"{s}.no_such_key=1", f"out={d / 'r'}"]))
            if entry.params is None:
                continue
            hints = typing.get_type_hints(entry.params)
            for f in dataclasses.fields(entry.params):
                for label, value in _bad_values(hints[f.name], section):
                    cases.append(Case("parameters", f"{section}={entry.name} {f.name}: {label}",
                                      lambda d, b=base, k=f"{section}.{f.name}={value}": [*b, k, f"out={d / 'r'}"]))
    return cases


