"""fedcluster as a library: configure, build a federation, run, get the numbers back (no CLI involved).

    import fedcluster

    fed = fedcluster.build_federation({"dataset": "digits", "scenario": "concept-swap", "num_clients": 12})
    res = fedcluster.run("configs/demo.yaml", rounds=20, progress=False)           # a YAML file + overrides
    res = fedcluster.run({"algorithm": {"name": "ifca", "num_clusters": 3}}, federation=fed, out="runs/x")
    res.rows[-1]["test_acc"], res.summary["best"]["val_acc"], res.run_dir

A configuration is what a YAML file holds: a path to one, a mapping with the same keys (nested sections
``algorithm: {name: fedprox, mu: 0.1}`` or dotted keys ``"algorithm.mu": 0.1``), or None for the defaults.
Keyword overrides take the same keys and win (``**{"scenario.alpha": 0.3}`` for dotted ones). Everything
is validated exactly as on the command line (:class:`fedcluster.errors.ConfigError` on a mistake), and a run
writes the same run directory as ``fedcluster run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedcluster.config.run_config import RunConfig, Source, load, read, resolve
from fedcluster.errors import ConfigError

if TYPE_CHECKING:
    from fedcluster.data.federation import Federation
    from fedcluster.engine.callbacks import RoundCallback

Config = Source


@dataclass
class Result:
    """What a run leaves: ``rows`` (rounds.csv as dicts of floats), ``summary`` (summary.json), ``run_dir``."""

    rows: list[dict[str, float]]
    summary: dict[str, Any]
    run_dir: Path
    config: RunConfig


def load_config(config: Config = None, /, **overrides: Any) -> tuple[RunConfig, dict[str, Any]]:
    """The validated :class:`RunConfig` and the typed algorithm/scenario/model parameters."""
    return load(config, overrides)


def build_federation(config: Config = None, /, use_cache: bool = True, **overrides: Any) -> Federation:
    """The federation a run with this configuration trains on (seeded, cached on disk like the CLI's)."""
    from fedcluster.data.build import build_federation as build

    if not isinstance(use_cache, bool):
        raise ConfigError(f"use_cache must be True or False, got {use_cache!r}")
    cfg, typed = load_config(config, **overrides)
    return build(cfg, typed["scenario"], use_cache=use_cache)


def run(config: Config = None, /, federation: Federation | None = None, callbacks: Sequence[RoundCallback] = (),
        **overrides: Any) -> Result:
    """Run one experiment; ``federation`` reuses an already built one (e.g. to compare methods on it).
    ``callbacks``: :class:`~fedcluster.engine.callbacks.RoundCallback` objects the round loop calls after its
    own (each round's files and checkpoint are written by then): ``on_start``, ``on_played``, ``on_round`` with
    a :class:`~fedcluster.engine.callbacks.RoundEnd`, ``on_finish``.
    Its number of clients is the run's: a ``num_clients`` that differs from it is replaced, with a note. A
    federation from :func:`build_federation` also gives the run its data keys (dataset, scenario and its
    parameters, data seed...), which config.yaml then records, so that ``fedcluster resume`` builds the same
    data; a configuration that names other values for them is refused."""
    from fedcluster.data.federation import Federation
    from fedcluster.engine.runner import Run

    raw = read(config, overrides)
    ranks = raw.get("ranks", 1)
    if federation is not None:
        if not isinstance(federation, Federation):
            raise ConfigError(f"federation= must be a Federation (from fedcluster.build_federation), got "
                              f"{type(federation).__name__}")
        n = federation.num_clients
        if "num_clients" in raw and raw["num_clients"] != n:
            from fedcluster.config.notes import note

            note(f"num_clients={raw['num_clients']!r} is replaced by the {n} clients of the federation passed")
        raw["num_clients"] = n
        _adopt_data_keys(raw, federation)
    if ranks != 1:
        raise ConfigError(f"ranks={ranks!r}: fedcluster.run works in this process; to spread a run over "
                          "processes use the command line (fedcluster run ... ranks=N) or torchrun")
    cfg, typed = resolve(raw)
    job = Run(cfg, typed, fed=federation, callbacks=_checked_callbacks(callbacks))
    summary = job.execute()
    return Result(rows=job.dir.read_rounds(), summary=summary, run_dir=job.dir.path, config=cfg)


def _checked_callbacks(callbacks: Any) -> list[RoundCallback]:
    from fedcluster.engine.callbacks import RoundCallback

    items = [callbacks] if isinstance(callbacks, RoundCallback) else callbacks
    try:
        items = list(items)
    except TypeError:
        items = [items]
    for c in items:
        if not isinstance(c, RoundCallback):
            raise ConfigError(f"callbacks= takes RoundCallback objects (subclass "
                              f"fedcluster.engine.callbacks.RoundCallback), got {type(c).__name__}")
    return items


def _adopt_data_keys(raw: dict[str, Any], fed: Federation) -> None:
    """Give ``raw`` the data keys ``fed`` was built with (``fed.built_from``); refuse a key naming another value.
    A federation built by hand records only its data set and scenario names (``fed.info``)."""
    source = getattr(fed, "built_from", None)
    if not isinstance(source, dict):
        known = {"dataset": fed.info.get("dataset"), "scenario": fed.info.get("name")}
        for key, value in known.items():
            if isinstance(value, str) and key in raw and raw[key] != value:
                raise ConfigError(f"{key}={raw[key]!r} does not fit the federation passed (its {key} is {value!r}): "
                                  f"leave {key} out, or build the federation with it")
        return
    for key, value in source.items():
        if key == "num_clients":
            continue
        given = raw.get(key)
        if key == "scenario_params":
            given = {k: v for k, v in (given or {}).items() if k in value and v != value[k]} or None
            if given:
                k = next(iter(given))
                raise ConfigError(f"scenario.{k}={given[k]!r} does not fit the federation passed (built with "
                                  f"scenario.{k}={value[k]!r}): leave it out, or build the federation with it")
        elif key in raw and given != value:
            raise ConfigError(f"{key}={given!r} does not fit the federation passed (built with {key}={value!r}): "
                              f"leave {key} out, or build the federation with it")
        raw[key] = dict(value) if isinstance(value, dict) else value
