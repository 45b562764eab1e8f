"""Checks on user input beyond types: the config file itself, finite numbers, ranges, sections, ``out=``.

Called from :mod:`fedcluster.config.run_config` (``read_config_file`` by ``load_raw``; ``check_raw``,
``check_config`` and ``check_params`` by ``resolve``). Every failure is a :class:`ConfigError` whose
one-line message names the key or file and says what to do.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from fedcluster.config.bounds import check_param_bounds
from fedcluster.config.notes import note
from fedcluster.config.yaml_dialect import load_yaml
from fedcluster.errors import ConfigError, UserError, did_you_mean
from fedcluster.storage.paths import output_path

SECTIONS = ("algorithm", "scenario", "model")
_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
# numpy's and torch's generators take larger seeds, but scikit-learn's random_state (KMeans) stops here
SEED_MAX = 2**32 - 1
INT_MAX = 2**63 - 1  # every integer key must fit in int64 (numpy/torch index arithmetic)
MAX_CONFIG_BYTES = 1 << 20  # a config file is a few hundred bytes; larger is not a config
MAX_CONFIG_NODES = 100_000  # values after YAML aliases are expanded

# hyper-parameter names whose meaning fixes a range, whatever the section (penalties, thresholds, rates)
_NON_NEGATIVE = {"mu", "prox", "prox_mu", "lam", "tol1", "tol2", "rho", "eps", "eps1", "floor", "delta", "nu",
                 "noise", "noise_std", "noise_rate", "alpha", "beta", "kappa", "init_scale"}
_UNIT_INTERVAL = {"mu_tilde", "beta1", "beta2", "alpha0", "noise_rate", "val_fraction", "kappa"}
_POSITIVE = {"adam_lr", "compression_ratio"}


# -- the config file ---------------------------------------------------------------------------------------
def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML config file as a mapping with string keys; refuses binary, non-UTF-8 and broken YAML."""
    p = Path(path)
    name = repr(str(p))
    if not p.is_file():
        raise ConfigError(f"config file {name} does not exist (or is not a regular file); check the path")
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"config file {name} cannot be read ({e.strerror}); check its permissions") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {name} is larger than {MAX_CONFIG_BYTES >> 20} MiB: not a config file")
    if b"\x00" in raw:
        raise ConfigError(f"config file {name} is binary (holds NUL bytes), not a YAML text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(f"config file {name} is not UTF-8 text (bad byte 0x{raw[e.start]:02x} on line {line}); "
                          "save it as UTF-8") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {name} is not valid YAML: {_yaml_problem(e)}") from None
    except ConfigError as e:
        raise ConfigError(f"config file {name}: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {name} must hold a mapping of keys to values (e.g. `rounds: 50`), "
                          f"not a {type(data).__name__}")
    _count_nodes(data, f"config file {name}", [MAX_CONFIG_NODES])
    _check_keys(data, name, "")
    return data


def _yaml_problem(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


def _check_keys(data: dict[Any, Any], name: str, section: str) -> None:
    for k, v in data.items():
        if not isinstance(k, str) or not k.strip():
            where = f" under {section}" if section else ""
            raise ConfigError(f"config file {name}: key {k!r}{where} is not a name; keys are words such as "
                              "`rounds: 50` or `lr: 0.1` (a number, ~ or null cannot be a key)")
        if not _KEY_NAME.match(k):  # not a setting: the file is no config (e.g. /etc/passwd); its text is not shown
            where = f" under {section}" if section else ""
            raise ConfigError(f"config file {name} is not a fedcluster config: it holds a key{where} that is not a "
                              "setting name (keys are words such as `rounds` or `lr`); check the path")
        if isinstance(v, dict):
            _check_keys(v, name, f"{section}.{k}" if section else k)


def _count_nodes(value: Any, name: str, budget: list[int], stack: tuple[int, ...] = ()) -> None:
    """Refuse self-referencing or alias-bombed YAML before any check walks it."""
    budget[0] -= 1
    if budget[0] < 0 or len(stack) > 50 or id(value) in stack:
        raise ConfigError(f"{name} is too large, too deeply nested or refers to itself "
                          "(YAML anchors/aliases); write the values out plainly")
    if isinstance(value, dict):
        for v in value.values():
            _count_nodes(v, name, budget, (*stack, id(value)))
    elif isinstance(value, list):
        for v in value:
            _count_nodes(v, name, budget, (*stack, id(value)))


# -- raw values --------------------------------------------------------------------------------------------
def _walk(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{key}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _walk(v, f"{key}[{i}]")
    else:
        yield key, value


def check_raw(raw: dict[str, Any]) -> None:
    """Sections are mappings, no unknown ``*_params`` section, every number finite and int64-sized."""
    _count_nodes(raw, "the configuration", [MAX_CONFIG_NODES])
    for k, v in raw.items():
        if not isinstance(k, str):
            raise ConfigError(f"key {k!r} is not a name; keys are words such as rounds or algorithm.mu")
        if k.endswith("_params"):
            if k[: -len("_params")] not in SECTIONS:
                sections = [f"{s}_params" for s in SECTIONS]
                raise ConfigError(f"unknown key {k!r};{did_you_mean(k, sections)} the sections are "
                                  + ", ".join(sections) + " (or write algorithm.<name>=...)")
            if not isinstance(v, dict):
                raise ConfigError(f"{k} must be a mapping of keys to values, got {v!r}; write e.g. "
                                  f"{k[:-7]}.<name>=VALUE or a nested `{k}:` block in the YAML file")
    for k, v in raw.items():
        base = k[:-7] if k.endswith("_params") else k
        for key, x in _walk(v, base):
            if isinstance(x, float) and not math.isfinite(x):
                raise ConfigError(f"{key}={x} is not a finite number; give a finite value "
                                  "(nan, inf and numbers beyond ±1.8e308 are refused)")
            if isinstance(x, int) and not isinstance(x, bool) and abs(x) > INT_MAX:
                raise ConfigError(f"{key}={x} is too large; integers must lie within ±{INT_MAX} (2**63-1)")
            for text, what in ((key, ""), (x, ": its value")):
                if isinstance(text, str) and (hidden := hidden_character(text)) is not None:
                    raise ConfigError(f"key {key!r}{what} holds the invisible character {hidden} (a NUL byte, a "
                                      "control or a line separator): retype it without")


def hidden_character(text: str) -> str | None:
    """The first character of ``text`` one cannot see or that ends a line (NUL, controls, format characters, line
    and paragraph separators) as ``U+XXXX``, None if there is none."""
    for c in text:
        if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"):
            return f"U+{ord(c):04X}"
    return None


# -- resolved values ---------------------------------------------------------------------------------------
def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_config(cfg: Any) -> None:
    """Ranges the types do not say: seeds, ``threads`` (capped at the usable CPUs), ``out=``."""
    for key in ("seed", "data_seed"):
        v = getattr(cfg, key)
        if v is not None and not 0 <= v <= SEED_MAX:
            raise ConfigError(f"{key}={v} is out of range; use an integer in 0..{SEED_MAX} (2**32-1)")
    if cfg.threads is not None and cfg.threads > (cpus := usable_cpus()):
        note(f"threads={cfg.threads} is more than the {cpus} usable CPUs; using threads={cpus}")
        cfg.threads = cpus
    if cfg.out is not None:
        check_out_dir(cfg.out)
    check_tracking_paths(cfg)


def check_params(section: str, params: dict[str, Any]) -> None:
    """Per-key ranges of section hyper-parameters whose meaning fixes one (penalties ≥ 0, rates in [0, 1])."""
    for k, v in params.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        key = f"{section}.{k}"
        if k in _UNIT_INTERVAL and not 0 <= v <= 1:
            raise ConfigError(f"{key}={v} is out of range; it must lie in [0, 1]")
        if k in _NON_NEGATIVE and v < 0:
            raise ConfigError(f"{key}={v} is out of range; it must be >= 0")
        if k in _POSITIVE and v <= 0:
            raise ConfigError(f"{key}={v} is out of range; it must be > 0")
        if k in ("num_clusters", "max_clusters") and v < 1:
            raise ConfigError(f"{key}={v} is out of range; it must be >= 1")
    check_param_bounds(section, params)


def check_out_dir(out: str) -> None:
    """``out=`` must be (or be creatable as) a writable directory outside /proc, /sys and /dev."""
    _checked_path(out, f"out={out}", folder=True)


def check_tracking_paths(cfg: Any) -> None:
    """``tensorboard_dir=`` (a folder) and the file of ``tracking_uri=sqlite:///FILE``, as ``out=`` is checked."""
    if cfg.tensorboard_dir is not None:
        _checked_path(cfg.tensorboard_dir, f"tensorboard_dir={cfg.tensorboard_dir}", folder=True)
    uri = cfg.tracking_uri
    if uri is not None and uri.startswith("sqlite:"):
        if not uri.startswith("sqlite:///") or uri == "sqlite:///":
            raise ConfigError(f"tracking_uri={uri}: an SQLite URI names a file, e.g. sqlite:///runs/mlflow.db")
        _checked_path(uri[len("sqlite:///"):], f"tracking_uri={uri}", folder=False)


def _checked_path(text: str, what: str, folder: bool) -> None:
    try:
        output_path(text, what, folder)
    except UserError as e:
        raise ConfigError(str(e)) from None
