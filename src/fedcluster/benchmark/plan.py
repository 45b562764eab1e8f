"""The benchmark as one experiment of the reproduction suite: a setting per scenario and a method per registered
algorithm, so that its runs go through the suite's run store and its worker processes (``--workers``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from fedcluster.benchmark.methods import CHOOSE_K, BenchMethod
from fedcluster.benchmark.taxonomy import BenchBudget, Scenario
from fedcluster.reproduce.run_store import NOT_RESULT_KEYS, RESULT_VERSION, method_version
from fedcluster.reproduce.spec import Budget, Experiment, Method, Setting

NAME = "benchmark"


@dataclass(frozen=True)
class Benchmark(Experiment):
    """The benchmark's experiment, with what a worker process needs besides: the modules to import first (the
    user's registered methods), whether K is chosen by validation and the extra overrides of every run."""

    plugins: tuple[str, ...] = ()
    choose_k: bool = False
    fixed_k: tuple[str, ...] = ()  # labels of the methods given the true K (or, with choose_k, K by validation)
    extra: tuple[str, ...] = ()

    def budget(self, name: str) -> Budget:
        return self.budgets[name]


def make(scenarios: Sequence[Scenario], methods: Sequence[BenchMethod], budget: BenchBudget,
         plugins: Sequence[str] = (), choose_k: bool = False, extra: Sequence[str] = ()) -> Benchmark:
    settings = tuple(Setting(s.name, tuple(s.overrides(budget)),
                             params={"fraction": s.fraction(budget), "test_size": float(s.test_size(budget))})
                     for s in scenarios)
    return Benchmark(
        name=NAME, title="every method against every kind of shift", source="fedcluster benchmark",
        claim="which method for which shift", kind="suite",
        budgets={budget.name: Budget(budget.clients, budget.rounds, "mlp")},
        methods=tuple(Method(m.name, m.overrides()) for m in methods), metrics=(), read="final",
        settings=settings, plugins=tuple(plugins), choose_k=choose_k,
        fixed_k=tuple(m.name for m in methods if m.k_key), extra=tuple(extra))


def pair_key(exp: Benchmark, setting: Setting, method: Method) -> str:
    """What decides one (scenario, method) cell on every seed: its overrides, the data kept, --set and --choose-k."""
    algorithm = next((o.split("=", 1)[1] for o in method.overrides if o.startswith("algorithm=")), "")
    text = json.dumps({"v": RESULT_VERSION, **method_version(algorithm),
                       "setting": [list(setting.overrides), sorted(setting.params.items())],
                       "method": list(method.overrides),
                       "extra": [o for o in exp.extra if o.split("=", 1)[0].strip() not in NOT_RESULT_KEYS],
                       "choose_k": list(CHOOSE_K) if exp.choose_k and method.label in exp.fixed_k else []},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
