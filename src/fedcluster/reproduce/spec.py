"""What one reproducible experiment is: paper numbers, budgets, federation settings, methods, metrics, verdict.

Plain data (no PyTorch): ``fedcluster reproduce --list`` reads it instantly. A runner (``kind``) turns an
:class:`Experiment` plus a :class:`Budget` and a seed into result records, one per (setting, method).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fedcluster.metrics.statistics import mean_sd
from fedcluster.reproduce.verdicts import Paired

# the user-visible budgets; "tiny" exists for the tests. protocol (only where an experiment defines it): the paper's
# training protocol (clients, rounds, batch, local steps, learning rates, data) with a model a CPU runs in hours
BUDGETS = ("small", "protocol", "paper")
BUDGET_RANK = {"tiny": 0, "small": 1, "protocol": 2, "paper": 3}  # larger: nearer the paper's own scale


@dataclass(frozen=True)
class Budget:
    """Size of one experiment: population, rounds, model (words), overrides applied to every run."""

    clients: int
    rounds: int
    model: str
    overrides: tuple[str, ...] = ()  # besides num_clients / rounds, which the runners set from the fields
    fraction: float = 1.0  # share of every client's train/validation samples kept (1 = all)
    test_size: int = 0  # images kept per test client (0 = all)
    note: str = ""  # anything else that differs from the paper at this budget
    # SGD learning rates tried for every run, the one of best validation accuracy kept (never chosen by test)
    lr_grid: tuple[float, ...] = ()

    def tiny(self) -> Budget:
        """A seconds-long version (for the tests): 2 rounds, 12 clients, 5% of their samples."""
        over = tuple(o for o in self.overrides if not o.startswith("eval_every="))
        return Budget(min(self.clients, 12), 2, self.model, over, min(self.fraction, 0.05), 50, "test budget")


@dataclass(frozen=True)
class Method:
    """One row of the paper's table: label, run-config overrides and the paper's value per metric key."""

    label: str
    overrides: tuple[str, ...]
    paper: Mapping[str, str] = field(default_factory=dict)
    # best-train reading: read this run at the best-train round of the method so labelled (same seed and setting)
    read_at: str = ""


@dataclass(frozen=True)
class Setting:
    """One federation variant of a sweep (``name`` "" when the experiment has a single setting)."""

    name: str
    overrides: tuple[str, ...] = ()
    paper: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # method label -> metric -> paper value
    params: Mapping[str, float] = field(default_factory=dict)  # runner-specific knobs (e.g. the lines' C, Δφ, b)
    methods: tuple[str, ...] = ()  # labels of the methods this setting runs (suite runner; empty: all)

    def runs(self, method: Method) -> bool:
        return not self.methods or method.label in self.methods


@dataclass(frozen=True)
class Metric:
    key: str
    header: str
    spec: str = ".2f"


@dataclass(frozen=True)
class Unavailable:
    """A paper result that cannot run here: listed with what it needs, never run with something else instead."""

    name: str
    title: str
    source: str
    claim: str
    needs: str  # e.g. "needs CIFAR files (...)", "method not implemented (...)"


Results = Mapping[tuple[str, str], Mapping[str, Sequence[float]]]  # (setting, method) -> metric -> per-seed
Verdict = Callable[[Results], tuple[str, str]]  # -> (one of verdicts.STATUSES, why)
ScaledVerdict = Callable[[Results, "Budget"], tuple[str, str]]  # a check whose bound scales with the federation


@dataclass(frozen=True)
class Experiment:
    """One headline result of one of the papers, runnable with ``fedcluster reproduce NAME``."""

    name: str
    title: str
    source: str  # paper and table/figure (user-facing: no internal references)
    claim: str  # the statement being checked, in words
    kind: str  # runner: suite | mixreg | lines | fedmd-rotation
    budgets: Mapping[str, Budget]
    methods: tuple[Method, ...]
    metrics: tuple[Metric, ...]
    # how a run is read: best-val or best-train (FedRC: the round of best validation / training accuracy; suite
    # runs of best-train score the training data every evaluated round) | best (HCFL) | final (CFL-GP) | error (FedMD)
    read: str = "best-val"
    settings: tuple[Setting, ...] = (Setting(""),)
    overrides: tuple[str, ...] = ()  # run-config overrides of every budget (dataset, scenario, ...)
    differences: tuple[str, ...] = ()  # every budget-independent way this differs from the paper
    curve: str = "test_acc"  # rounds.csv column drawn per method (mean over seeds) in the figure
    verdict: Verdict | ScaledVerdict | None = None
    verdict_uses_budget: bool = False  # verdict(results, budget): e.g. a cluster count scaled to the clients
    open_question: bool = False
    tiny_rounds: int = 2  # rounds of the test budget (methods with a fixed first phase need more)

    def budget(self, name: str) -> Budget:
        """The named budget; "tiny" (tests only) is the small one cut to a few rounds (and, for the image
        suites, a handful of clients and samples). A budget the experiment does not define is a KeyError."""
        if name != "tiny":
            return self.budgets[name]
        small = self.budgets["small"]
        if self.kind == "suite":
            return replace(small.tiny(), rounds=self.tiny_rounds)
        clients = small.clients if self.kind in ("mixreg", "lines") else min(small.clients, 50)
        return replace(small, clients=clients, rounds=self.tiny_rounds, note="test budget")

    def pairs(self) -> list[tuple[str, str]]:
        """Every (setting, method label) this experiment runs, in its order."""
        return [(s.name, m.label) for s in self.settings for m in self.methods if s.runs(m)]

    def runs_of(self, seeds: int) -> set[tuple[int, str, str]]:
        """Every (seed, setting, method label) of ``seeds`` seeds: the records a complete run holds."""
        return {(seed, setting, method) for seed in range(seeds) for setting, method in self.pairs()}

    def trimmed(self, name: str) -> Experiment:
        """The experiment as a budget runs it: the test budget keeps two settings and, for suites, three methods."""
        if name != "tiny":
            return self
        methods = self.methods[:3] if self.kind == "suite" else self.methods
        return replace(self, settings=self.settings[:2], methods=methods)

    def protocol(self, budget: str) -> str:
        """What decides this experiment's runs at the named budget, and nothing else (no notes or descriptions):
        the budget's numbers and overrides, and every override of the experiment, its settings and its methods.
        Stored with the records, so that a run continues them only when none of it changed."""
        b = self.budget(budget)
        grid = [list(b.lr_grid)] if b.lr_grid else []  # absent from older protocols: their records still match
        return "protocol " + json.dumps({
            "budget": [b.clients, b.rounds, list(b.overrides), b.fraction, b.test_size, *grid],
            "overrides": list(self.overrides),
            "settings": [[s.name, list(s.overrides), sorted(s.params.items()), list(s.methods)] for s in self.settings],
            "methods": [[m.label, list(m.overrides), m.read_at] for m in self.methods]}, ensure_ascii=False)

    def judge(self, results: Results, budget: str) -> tuple[str, str]:
        """The verdict of recorded ``results`` measured at the named budget (the check fixed in the spec, so
        that re-judging stored records after a check changes needs no rerun)."""
        if self.verdict is None:
            return "no verdict", "this experiment has no automatic check"
        if self.verdict_uses_budget:
            return self.verdict(results, self.budget(budget))  # type: ignore[call-arg]
        return self.verdict(results)  # type: ignore[call-arg]

    def paper_value(self, setting: Setting, method: Method, key: str) -> str:
        return setting.paper.get(method.label, {}).get(key) or method.paper.get(key, "")


def mean_of(results: Results, setting: str, method: str, key: str) -> float:
    """Mean over seeds of one cell (NaN if absent): the building block of verdicts."""
    return mean_sd(results.get((setting, method), {}).get(key, []))[0]


def seed_diffs(results: Results, setting: str, a: str, b: str, key: str, setting_b: str | None = None,
               key_b: str | None = None) -> list[float]:
    """a − b seed by seed, in seed order (NaN where either is NaN); ``setting_b``/``key_b``: b's setting/metric when
    they differ from a's (e.g. one method at two participation rates, or a's ARI at round 5 against b's final)."""
    xs = results.get((setting, a), {}).get(key, [])
    ys = results.get((setting if setting_b is None else setting_b, b), {}).get(key if key_b is None else key_b, [])
    return [x - y for x, y in zip(xs, ys, strict=False)]


def paired_of(diffs: Sequence[float]) -> Paired:
    """The mean of per-seed differences and its standard error (NaN pairs dropped)."""
    mean, sd, n = mean_sd([d for d in diffs if not math.isnan(d)])
    return Paired(mean, sd / math.sqrt(n) if n > 1 else math.nan)


def paired(results: Results, setting: str, a: str, b: str, key: str, setting_b: str | None = None,
           key_b: str | None = None) -> Paired:
    """a − b over the seeds both have (the same seed's federation for both), as a :class:`Paired` difference
    (arguments as :func:`seed_diffs`)."""
    return paired_of(seed_diffs(results, setting, a, b, key, setting_b, key_b))


def strongest_rival(results: Results, setting: str, a: str, others: Sequence[str], key: str) -> str | None:
    """The best of ``others`` (a left out) by mean ``key`` in ``setting``; None when none was measured."""
    rivals = [o for o in others if o != a and not math.isnan(mean_of(results, setting, o, key))]
    return max(rivals, key=lambda o: mean_of(results, setting, o, key)) if rivals else None


def lead(results: Results, setting: str, a: str, others: Sequence[str], key: str, key_b: str | None = None) -> Paired:
    """a minus the best of ``others`` by mean (paired by seed): a's lead over its strongest rival (``key_b``: the
    rivals' metric when it differs from a's)."""
    best = strongest_rival(results, setting, a, others, key if key_b is None else key_b)
    return Paired(math.nan) if best is None else paired(results, setting, a, best, key, key_b=key_b)


def paired_lower(results: Results, setting: str, a: str, b: str, key: str, z: float = 2.0) -> tuple[float, float]:
    """Mean over seeds of a − b (the same seed's federation for both) and that mean minus ``z`` standard errors:
    a lower bound > 0 says a beats b beyond the seed-to-seed noise (NaN with fewer than 2 paired seeds)."""
    d = paired(results, setting, a, b, key)
    return d.mean, d.mean - z * d.se
