"""Which methods the benchmark runs and at which settings: every registered algorithm (the built-in ones and any a
``--plugin`` module registers), at its documented defaults, except that a method with a fixed number of clusters
(a ``num_clusters`` or ``num_groups`` parameter of default K > 1 that is not a starting K^0) is given the scenario's
true K. A method that refuses a scenario (a regression-only method on images, a label-count method on regression)
refuses it in one line when it starts; the table marks it n/a with that line.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from fedcluster.errors import UserError, did_you_mean

K_KEYS = ("num_clusters", "num_groups")
CHOOSE_K = (2, 3, 4, 5)  # the K tried by --choose-k, the one of best validation kept


@dataclass(frozen=True)
class BenchMethod:
    """One method of the table: its algorithm name, its fixed-K key (None: it finds K itself, or has one model)."""

    name: str
    k_key: str | None
    description: str

    @property
    def setting(self) -> str:
        return f"{self.k_key} = true K" if self.k_key else "defaults"

    def overrides(self, k: int | None = None) -> tuple[str, ...]:
        """Run-config overrides: the algorithm and, for a fixed-K method, K (``k``; None: the scenario's true K)."""
        if self.k_key is None:
            return (f"algorithm={self.name}",)
        return (f"algorithm={self.name}", f"algorithm.{self.k_key}={'TRUE_K' if k is None else k}")


def _params(name: str) -> list[tuple[str, str, str]]:
    """(key, default, description) of ``name``'s parameters, from the catalog without importing a built-in."""
    from fedcluster.catalog.param_tables import PARAMS
    from fedcluster.catalog.registry import ALGORITHMS

    if not ALGORITHMS.is_loaded(name) and name in PARAMS["algorithm"]:
        found = PARAMS["algorithm"][name]
        return [(k, default, text) for k, _, default, text in (found[1] if found else ())]
    params = ALGORITHMS.get(name).params
    if params is None or not dataclasses.is_dataclass(params):
        return []
    out = []
    for f in dataclasses.fields(params):
        default = f.default if f.default is not dataclasses.MISSING else None
        out.append((f.name, str(default), str(f.metadata.get("help", "")) if f.metadata else ""))
    return out


def k_key_of(name: str) -> str | None:
    """The key that fixes ``name``'s number of clusters, or None: a method with one model, one that finds K (no
    such key, a null default) or one whose K is a starting K^0 that it adapts."""
    for key, default, text in _params(name):
        if key in K_KEYS:
            try:
                k = int(default)
            except ValueError:
                return None
            return key if k > 1 and not text.startswith("K^0") else None
    return None


def every_method() -> list[BenchMethod]:
    """Every registered algorithm (built-in and registered at run time), by name."""
    from fedcluster.catalog.registry import ALGORITHMS

    descriptions = ALGORITHMS.descriptions()
    return [BenchMethod(n, k_key_of(n), descriptions.get(n, "")) for n in ALGORITHMS.names()]


def select_methods(spec: str | None) -> list[BenchMethod]:
    """The methods ``--methods`` names: ``a,b`` those only; ``+name`` / ``-name`` every method with one more (or one
    fewer); None: every method. An unknown name is refused in one line."""
    every = {m.name: m for m in every_method()}
    if spec is None:
        return list(every.values())
    items = [i.strip() for i in spec.split(",") if i.strip()]
    if not items:
        raise UserError("--methods: name at least one method (see `fedcluster benchmark --list`)")
    plain = [i for i in items if i[0] not in "+-"]
    chosen = list(plain) if plain else list(every)
    for item in items:
        name = item.lstrip("+-")
        if name not in every:
            raise UserError(f"--methods: unknown method {name!r};{did_you_mean(name, list(every))} choose from "
                            f"{', '.join(every)} (see `fedcluster benchmark --list`; a method of your own: "
                            "--plugin MODULE)")
        if item.startswith("-") and name in chosen:
            chosen.remove(name)
        elif item.startswith("+") and name not in chosen:
            chosen.append(name)
    if not chosen:
        raise UserError(f"--methods {spec}: that leaves no method to run")
    return [every[n] for n in sorted(set(chosen))]


def load_plugins(modules: list[str]) -> None:
    """Import each ``--plugin`` module (a dotted name, or a .py file), which registers its methods or scenarios
    with the registries (see docs/extending.md); one that cannot be imported is refused in one line."""
    for module in modules:
        try:
            if module.endswith(".py"):
                path = Path(module)
                if not path.is_file():
                    raise UserError(f"--plugin {module}: no such file")
                name = f"fedcluster_plugin_{path.stem}"
                if name in sys.modules:
                    continue
                spec = importlib.util.spec_from_file_location(name, path)
                assert spec is not None and spec.loader is not None
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
            else:
                importlib.import_module(module)
        except ImportError as e:
            raise UserError(f"--plugin {module}: cannot import it ({e}); give a module on the Python path "
                            "(e.g. mypackage.mymethod) or a .py file") from None
