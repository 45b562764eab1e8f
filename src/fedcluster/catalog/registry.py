"""Name → builder registries for algorithms, datasets, scenarios and models.

Each registry knows every built-in name, its description and the paper it cites from
:mod:`fedcluster.catalog.names` without importing anything heavy; the module that implements a name is imported
the first time the name is looked up (``get``) and registers the real entry. A registration is the one
declaration of a name: ``python -m fedcluster.app.regenerate`` writes the catalog from them. Names registered at
run time (your own method or scenario, see docs/extending.md) need no catalog line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fedcluster.catalog import names as catalog
from fedcluster.errors import ConfigError, did_you_mean

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    obj: T
    description: str
    params: type | None  # dataclass of typed hyper-parameters, or None
    paper: str | None = None  # the paper it comes from: a name of catalog.papers.PAPERS or a full citation


class Registry(Generic[T]):
    """A named collection; looking up an unknown name lists the valid ones."""

    def __init__(self, kind: str, declared: Mapping[str, tuple[str, str]] | None = None,
                 aliases: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}
        self._declared: dict[str, tuple[str, str]] = dict(declared or {})  # name -> (module, description)
        self.aliases: dict[str, str] = dict(aliases or {})  # another spelling -> the name

    def canonical(self, name: str) -> str:
        """The registered name ``name`` spells (``fmnist`` -> ``fashion-mnist``); any other name unchanged."""
        return self.aliases.get(name, name) if isinstance(name, str) else name

    def register(
        self, name: str, description: str, params: type | None = None, *, paper: str | None = None
    ) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            self.add(name, obj, description, params, paper=paper)
            return obj

        return deco

    def add(self, name: str, obj: T, description: str, params: type | None = None, *,
            paper: str | None = None) -> None:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = Entry(name, obj, description, params, paper)

    def get(self, name: str) -> Entry[T]:
        name = self.canonical(name)
        if name not in self._entries and name in self._declared:
            module = self._declared[name][0]
            importlib.import_module(module)
            if name not in self._entries:
                raise RuntimeError(f"fedcluster.catalog says {module} registers {self.kind} {name!r}, "
                                   "but it does not: regenerate the catalog with "
                                   "`PYTHONPATH=src python -m fedcluster.app.regenerate`")
        if name not in self._entries:
            hint = did_you_mean(str(name), self.names(), self.aliases)
            raise ConfigError(f"unknown {self.kind} {name!r};{hint} choose one of: "
                              f"{', '.join(self.names())}")
        return self._entries[name]

    def names(self) -> list[str]:
        """Every name, built-in or registered, without importing any implementation."""
        return sorted(set(self._declared) | set(self._entries))

    def descriptions(self) -> dict[str, str]:
        """name -> one-line description, sorted by name, without importing any implementation."""
        light = {n: d for n, (_, d) in self._declared.items()}
        light.update({n: e.description for n, e in self._entries.items()})
        return {n: light[n] for n in sorted(light)}

    def paper(self, name: str) -> str | None:
        """The paper ``name`` declares (a name of catalog.papers.PAPERS or a full citation), without importing."""
        if name in self._entries:
            return self._entries[name].paper
        return catalog.PAPER_OF.get(self.kind, {}).get(name)

    def registered(self) -> list[Entry[T]]:
        """The entries registered so far, by name (imports nothing)."""
        return [self._entries[n] for n in sorted(self._entries)]

    def is_loaded(self, name: str) -> bool:
        """Whether ``name`` has its real entry (its module is imported, or it was registered at run time)."""
        return name in self._entries

    def load_all(self) -> None:
        """Import every module of the catalog (all built-in entries become real)."""
        for name in self._declared:
            self.get(name)

    def __iter__(self) -> Iterator[Entry[T]]:
        self.load_all()
        return iter(self._entries[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        name = self.canonical(name) if isinstance(name, str) else name
        return name in self._entries or name in self._declared


ALGORITHMS: Registry[Any] = Registry("algorithm", catalog.ALGORITHMS)
DATASET_ALIASES = {"fmnist": "fashion-mnist", "fashion_mnist": "fashion-mnist", "fashionmnist": "fashion-mnist",
                   "cifar-10": "cifar10", "cifar-100": "cifar100", "cifar_10": "cifar10", "cifar_100": "cifar100",
                   "tinyimagenet": "tiny-imagenet", "tiny_imagenet": "tiny-imagenet"}  # the spellings papers use
DATASETS: Registry[Any] = Registry("dataset", catalog.DATASETS, DATASET_ALIASES)
SCENARIOS: Registry[Any] = Registry("scenario", catalog.SCENARIOS)
MODELS: Registry[Any] = Registry("model", catalog.MODELS)
REGISTRIES: dict[str, Registry[Any]] = {"algorithms": ALGORITHMS, "datasets": DATASETS, "scenarios": SCENARIOS,
                                        "models": MODELS}


def load_builtins() -> None:
    """Import every module of the catalog: all built-in algorithms, data sets, scenarios and models registered."""
    for registry in REGISTRIES.values():
        registry.load_all()
