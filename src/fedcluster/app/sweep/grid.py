"""The grid of a sweep: ``key=v1,v2`` items turned into points, each an ordinary run's ``key=value`` overrides.

Values are split at the commas outside brackets (``scenario.ratios=[8,1,1],[1,1,1]`` is two values) and each
one is parsed like a ``key=value`` override of ``fedcluster run``. A key given one value is fixed for every
point; keys given several values are the grid's axes, combined as a cartesian product in the order given (the
last key varies fastest). A section key (``algorithm.num_clusters``) applies to the points whose algorithm
(scenario, model) takes it and is left out of the others, so ``algorithm=fedavg,ifca algorithm.num_clusters=2,3``
runs FedAvg once per setting of the other keys; a key that no point takes is refused. Every point is resolved
(validated) before anything runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from fedcluster.catalog.registry import ALGORITHMS, MODELS, SCENARIOS
from fedcluster.config.run_config import SECTIONS, RunConfig, build_params, load_raw, parse_value, resolve
from fedcluster.errors import ConfigError

NAME_KEYS = ("algorithm", "dataset", "scenario", "model")  # their values name themselves in a folder name
SWEEP_OWNED = ("out",)  # the sweep chooses each run's folder
MAX_NAME = 120  # bytes of a point's folder name (file systems allow 255; logs/NAME.log and the hash fit beside it)
SAFE_NAME = re.compile(r"[A-Za-z0-9._+=,-]{1,255}")  # what a point's folder name is made of


@dataclass(frozen=True)
class Axis:
    key: str
    values: tuple[str, ...]  # as typed, each parsed when the point is resolved


@dataclass
class Point:
    """One run of the grid: its folder name, its overrides and its setting (the swept keys but the seed)."""

    name: str
    overrides: list[str]
    setting: dict[str, str]
    seed: int
    algorithm: str
    config: RunConfig


def split_values(text: str) -> list[str]:
    """``a,b,[1,2],c`` -> ``['a', 'b', '[1,2]', 'c']``: commas inside brackets or braces belong to a value."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


def parse_axes(items: list[str]) -> list[Axis]:
    """The ``key=v1,v2`` items as axes (one value: a fixed key), each key once."""
    axes: dict[str, Axis] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"argument {item!r} is not of the form key=value or key=v1,v2,... (e.g. lr=0.01,0.1)")
        if key in SWEEP_OWNED:
            raise ConfigError(f"{key}= is chosen by the sweep for each run; give the sweep's folder with --out DIR")
        if key in axes:
            raise ConfigError(f"{key} is given twice; give all its values once: {key}=v1,v2,...")
        values = split_values(text)
        if any(not v for v in values):
            raise ConfigError(f"{item!r} has an empty value; separate values with single commas")
        if len(set(values)) != len(values):
            raise ConfigError(f"{item!r} gives a value twice")
        _refuse_same_values(key, values)
        axes[key] = Axis(key, tuple(values))
    return list(axes.values())


def _same(value: Any) -> str:
    """A value as a run reads it, for comparing spellings: ``0.1`` and ``1e-1`` alike, ``1`` and ``1.0`` alike."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(float(value))
    return json.dumps(value, sort_keys=True, default=str)


def _refuse_same_values(key: str, values: list[str]) -> None:
    seen: dict[str, str] = {}
    for v in values:
        other = seen.setdefault(_same(parse_value(v)), v)
        if other != v:
            raise ConfigError(f"{key}={other} and {key}={v} are the same value; give each value of {key} once")


def grid_size(axes: list[Axis]) -> int:
    """The number of points of the grid before methods drop the keys they do not take (an upper bound)."""
    return math.prod(len(a.values) for a in axes)


def _takes(section: str, name: Any, key: str, values: list[Any]) -> bool:
    """Whether the algorithm (scenario, model) ``name`` takes the parameter ``key`` with these values. It does not
    when it has no such parameter, or when the parameter is pinned (it accepts its default and refuses every other
    value given, as FedAvg's num_clusters = 1): the key is then left out of its points."""
    try:
        params = {"algorithm": ALGORITHMS, "scenario": SCENARIOS, "model": MODELS}[section].get(str(name)).params
    except ConfigError:
        return True  # an unknown name: resolving the point says so
    fields = {f.name: f for f in dataclasses.fields(params)} if params is not None else {}
    if key not in fields:
        return False
    default = fields[key].default
    others = [v for v in values if v != default]
    if not others or any(_accepts(params, key, v, section, str(name)) for v in others):
        return True
    return not _accepts(params, key, default, section, str(name))


def _pinned_file_params(raw: dict[str, Any], names: dict[str, Any], chosen: dict[str, str]) -> list[str]:
    """Overrides that put back the default of a config file's section parameter that the point's method pins
    (``num_clusters: 3`` of a FedRC config for a FedAvg point: ``algorithm.num_clusters=1``)."""
    out = []
    for section in SECTIONS:
        params = raw.get(section + "_params")
        for key, value in (params.items() if isinstance(params, dict) else ()):
            if f"{section}.{key}" in chosen or _takes(section, names[section], key, [value]):
                continue
            cls = {"algorithm": ALGORITHMS, "scenario": SCENARIOS, "model": MODELS}[section].get(
                str(names[section])).params
            default = next(f.default for f in dataclasses.fields(cls) if f.name == key)
            out.append(f"{section}.{key}={json.dumps(default)}")
    return out


def _accepts(params: type, key: str, value: Any, section: str, name: str) -> bool:
    try:
        build_params(params, {key: value}, section, name)
    except ConfigError:
        return False
    return True


def _applies(key: str, names: dict[str, Any], values: tuple[str, ...]) -> bool:
    """A section key applies when the point's algorithm (scenario, model) takes it; other keys always do."""
    section, _, sub = key.partition(".")
    return not sub or section not in SECTIONS or _takes(section, names[section], sub, [parse_value(v) for v in values])


def _label(key: str, swept: list[str]) -> str:
    short = key.rsplit(".", 1)[-1]
    return short if sum(k.rsplit(".", 1)[-1] == short for k in swept) == 1 else key


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_") or "_"


def point_name(setting: list[tuple[str, str]], swept: list[str]) -> str:
    """``ifca,num_clusters=2,lr=0.01,seed=0``: the swept keys (names of methods, data sets, ... bare); a name longer
    than ``MAX_NAME`` bytes is cut and ends with a hash of the whole."""
    parts = [_safe(v) if k in NAME_KEYS else f"{_label(k, swept)}={_safe(v)}" for k, v in setting]
    name = ",".join(parts) or "run"
    if len(name) > MAX_NAME:
        name = f"{name[:MAX_NAME - 13]}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"
    return name


def expand(config: str | None, axes: list[Axis]) -> list[Point]:
    """Every point of the grid, resolved; inapplicable section keys dropped; duplicates merged."""
    swept = [a.key for a in axes if len(a.values) > 1]
    points: dict[str, Point] = {}
    runs: dict[str, str] = {}  # a point's whole config -> its name
    used: set[str] = set()
    chosen_names: dict[str, set[str]] = {s: set() for s in SECTIONS}
    values_of = {a.key: a.values for a in axes}
    for combo in itertools.product(*(a.values for a in axes)):
        chosen = dict(zip((a.key for a in axes), combo, strict=True))
        raw = load_raw(config, [f"{k}={v}" for k, v in chosen.items() if k in SECTIONS])
        names = {s: raw.get(s, getattr(RunConfig, s)) for s in SECTIONS}
        for s in SECTIONS:
            chosen_names[s].add(str(names[s]))
        kept = {k: v for k, v in chosen.items() if _applies(k, names, values_of[k])}
        used |= set(kept)
        overrides = [f"{k}={v}" for k, v in kept.items()] + _pinned_file_params(raw, names, chosen)
        try:
            cfg, _ = resolve(load_raw(config, overrides))
        except ConfigError as e:
            where = ", ".join(f"{k}={v}" for k, v in kept.items() if k in swept)
            raise ConfigError(f"{e} (in the sweep's point {where})" if where else str(e)) from None
        setting = [(k, v) for k, v in kept.items() if k in swept]
        name = point_name(setting, swept)
        same = json.dumps({k: v for k, v in cfg.to_dict().items() if k != "out"}, sort_keys=True, default=str)
        if same in runs and runs[same] != name:
            raise ConfigError(f"the sweep's points {runs[same]} and {name} are the same run (two spellings of one "
                              "value?); give each value once")
        runs.setdefault(same, name)
        if name not in points:
            points[name] = Point(name, overrides, {k: v for k, v in setting if k != "seed"}, cfg.seed,
                                 cfg.algorithm, cfg)
    unused = [a.key for a in axes if a.key not in used]
    if unused:
        section = unused[0].split(".")[0]
        among = ", ".join(sorted(chosen_names.get(section, ())))
        raise ConfigError(f"unknown key {unused[0]}: no {section} of this sweep ({among}) takes it; "
                          "`fedcluster list NAME` shows the keys of each")
    return _unique_names(list(points.values()))


def _unique_names(points: list[Point]) -> list[Point]:
    """Values that read alike once made safe for a folder name (``[8,1,1]`` and ``8_1_1``) get a short hash."""
    seen: dict[str, int] = {}
    for p in points:
        seen[p.name.lower()] = seen.get(p.name.lower(), 0) + 1
    for p in points:
        if seen[p.name.lower()] > 1:
            p.name += "-" + hashlib.sha1(json.dumps(p.overrides).encode()).hexdigest()[:6]
    return points
