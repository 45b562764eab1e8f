"""``fedcluster reproduce NAME --estimate``: what a budget needs on this machine, measured. Every (setting, method)
of a suite experiment runs a few rounds at the budget on seed 0's federation; a run's time is then its fixed cost
plus the budget's rounds × the training round's time plus its evaluations × one evaluation's time. Kept in
``NAME.estimate.json`` (plain JSON) beside the page, which quotes it while the budget has no records."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from fedcluster.data.federation import Federation
from fedcluster.errors import UserError
from fedcluster.reproduce.spec import Experiment

TIMED_ROUNDS = 4  # round 1 warms up; rounds 2 … 4 are timed (the last one also evaluates, timed again apart)
MAX_BYTES = 10_000_000  # an estimate is a few kB (a few lines per run)
MAX_DEPTH = 8  # an estimate nests 3 levels: the estimate, its runs, a run


def nesting(text: str) -> int:
    """The deepest nesting of JSON lists and objects in ``text`` (brackets inside strings not counted)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
    return max(itertools.accumulate((c in "[{") - (c in "]}") for c in bare if c in "[]{}"), default=0)


@dataclass
class RunCost:
    """One (setting, method) at the budget, for one seed (seconds)."""

    setting: str
    method: str
    fixed: float  # set-up: the run's time outside its rounds
    train_round: float  # one round without evaluation
    evaluation: float  # one evaluation
    evaluations: int  # evaluations at the budget's rounds and eval_every
    rounds: int

    @property
    def seconds(self) -> float:
        return self.fixed + self.rounds * self.train_round + self.evaluations * self.evaluation


@dataclass
class Estimate:
    """The measured need of one budget (``runs``: one seed; ``build``: the federations of one seed)."""

    name: str
    budget: str
    protocol: str
    extra: list[str]
    date: str
    build: float = 0.0
    runs: list[RunCost] = field(default_factory=list)
    load_average: float = math.nan  # the machine's load average per core while it was measured (other work slows it)

    def cpu_hours(self, seeds: int = 3) -> float:
        """One run at a time, in the threads ``extra`` gives each run (default: the machine's)."""
        return seeds * (self.build + sum(r.seconds for r in self.runs)) / 3600

    def wall_hours(self, seeds: int, workers: int) -> float:
        """Wall time with ``workers`` runs at once (``--workers``: the dearest handed out first once every setting
        is timed): the seeds × runs list-scheduled, dearest first, each onto the worker that frees up first (the
        federations' build shared out by run)."""
        share = self.build / max(len(self.runs), 1)
        busy = [0.0] * max(workers, 1)
        for run in sorted((r.seconds + share for r in self.runs for _ in range(seeds)), reverse=True):
            busy[busy.index(min(busy))] += run
        return max(busy) / 3600

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @staticmethod
    def load(path: Path) -> Estimate | None:
        """The stored estimate, or None (no file, or one that is not an estimate: it is then ignored); a file too
        large or nested too deeply to be one is refused in one line before it is parsed."""
        try:
            large = path.stat().st_size > MAX_BYTES
            text = "" if large else path.read_text()
        except (OSError, ValueError):
            return None
        if large or nesting(text) > MAX_DEPTH:
            raise UserError(f"{path} is larger or nested more deeply than an estimate (at most {MAX_BYTES:,} bytes "
                            f"and {MAX_DEPTH} levels): delete it, or run the --estimate command again")
        try:
            raw: dict[str, Any] = json.loads(text)
            runs = [RunCost(**r) for r in raw.pop("runs")]
            return Estimate(**raw, runs=runs)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None


def evaluations(rounds: int, eval_every: int) -> int:
    """Evaluated rounds of a run: every ``eval_every``-th and the last (engine.runner)."""
    return len({t for t in range(1, rounds + 1) if t % eval_every == 0} | {rounds})


def eval_every_of(overrides: Sequence[str]) -> int:
    """The run's eval_every (its last override wins; 1 by default)."""
    values = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].strip() == "eval_every"]
    return int(values[-1]) if values else 1


def cost_of(setting: str, method: str, overrides: Sequence[str], rounds: int, wall: float,
            seconds: Sequence[float], evaluation: float) -> RunCost:
    """A RunCost from a timed run of ``len(seconds)`` rounds that took ``wall`` in all, the last of them with one
    evaluation, which itself took ``evaluation`` when timed again. A round's time is the mean over the rounds after
    the first (a method alternating two kinds of round, as CFL-GP's clustering rounds, is counted at its mean)."""
    train = statistics.mean([*seconds[1:-1], max(seconds[-1] - evaluation, 0.0)])
    return RunCost(setting, method, fixed=max(wall - sum(seconds), 0.0), train_round=train, evaluation=evaluation,
                   evaluations=evaluations(rounds, eval_every_of(overrides)), rounds=rounds)


def timed_run(overrides: Sequence[str], fed: Federation) -> tuple[float, list[float], float]:
    """Wall time, per-round seconds and one more evaluation's time (the median of two) of a run of ``overrides``."""
    from fedcluster.engine.round_evaluation import evaluate
    from fedcluster.reproduce.run_common import make_run

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = make_run(overrides, Path(tmp) / "run", fed)
        run.execute()
        wall = time.perf_counter() - t0
        seconds = [r["seconds"] for r in run.dir.read_rounds()]
        again = []
        for _ in range(2):
            t0 = time.perf_counter()
            evaluate(run.alg, run.fed, run.cfg.eval_train)
            again.append(time.perf_counter() - t0)
    return wall, seconds, statistics.median(again)


def estimate(exp: Experiment, budget_name: str, extra: Sequence[str], out: Path,
             say: Callable[[str], None]) -> Estimate:
    """Time every (setting, method) of a suite experiment at ``budget_name`` and store the estimate in ``out``."""
    if exp.kind != "suite":
        raise UserError(f"--estimate times the experiments run by the generic suite runner; {exp.name} is not one "
                        "(its small budget's page gives its wall time)")
    from fedcluster.reproduce import run_suite

    budget = exp.budget(budget_name)
    found = Estimate(exp.name, budget_name, exp.protocol(budget_name), list(extra), time.strftime("%Y-%m-%d"))
    total = sum(setting.runs(m) for setting in exp.settings for m in exp.methods)
    say(f"{exp.name}: timing {total} run(s) over {TIMED_ROUNDS} rounds each at the {budget_name} budget "
        f"({budget.clients} clients); a line as each one is timed")
    for setting in exp.settings:
        t0 = time.perf_counter()
        say(f"building the federation{' of ' + setting.name if setting.name else ''} …")
        base = run_suite.base_overrides(exp, budget, setting, 0, extra)
        fed = run_suite.build(exp, budget, setting, base, 0)
        found.build += time.perf_counter() - t0
        for method in (m for m in exp.methods if setting.runs(m)):
            at = f" at {setting.name}" if setting.name else ""
            say(f"[{len(found.runs) + 1}/{total}] timing {method.label}{at} …")
            over = run_suite.method_overrides(setting, method, base, fed)
            wall, seconds, evaluation = timed_run([*over, f"rounds={TIMED_ROUNDS}", f"eval_every={TIMED_ROUNDS}"],
                                                  fed)
            cost = cost_of(setting.name, method.label, over, budget.rounds, wall, seconds, evaluation)
            found.runs.append(cost)
            # a learning-rate grid trains the run once per rate: timed at one, counted at each
            found.runs.extend(replace(cost, method=f"{method.label} lr={lr:g}") for lr in budget.lr_grid[1:])
            where = f"{exp.name} {setting.name}".strip()
            say(f"{where} {method.label}: {cost.train_round:.2f} s a round, {cost.evaluation:.2f} s an evaluation "
                f"× {cost.evaluations}, {cost.seconds / 60:.1f} min a run")
    found.load_average = os.getloadavg()[0] / max(os.cpu_count() or 1, 1)
    found.save(out / f"{exp.name}.estimate.json")
    return found


def need_line(found: Estimate, command: str, limit_hours: float) -> str:
    """The page's sentence for a budget not yet run, from a measured estimate."""
    hours = found.cpu_hours()
    amount = f"{hours * 60:.0f} CPU minutes" if hours < 2 else f"{hours:.1f} CPU hours"
    threads = next((e.split("=", 1)[1] for e in found.extra if e.startswith("threads=")), "")
    how = f"one run at a time{f', {threads} thread(s) a run' if threads else ''}"
    verdict = "a CPU can run it" if hours <= limit_hours else f"more than {limit_hours:g}: it needs a GPU"
    slowest = max(found.runs, key=lambda r: r.seconds, default=None)
    worst = (f"; the longest run: {slowest.method}{' at ' + slowest.setting if slowest.setting else ''}, "
             f"{slowest.seconds / 60:.0f} min") if slowest else ""
    busy = (f", with a load average of {found.load_average:.1f} a core from other work, so on a quiet machine it "
            "takes less" if found.load_average > 1.2 else "")
    return (f"Paper budget: not run. Measured need: about {amount} for 3 seeds, {how} ({verdict}; every method and "
            f"setting timed over {TIMED_ROUNDS} rounds at the paper budget on {found.date}{busy}, then scaled to its "
            f"rounds and evaluations: `fedcluster reproduce {found.name} --budget paper --estimate`{worst}). "
            f"Command: `{command}`")


def matching(path: Path, exp: Experiment, budget_name: str) -> Estimate | None:
    """The stored estimate of ``budget_name`` if it was measured under the experiment's current protocol."""
    found = Estimate.load(path)
    if found is None or found.budget != budget_name or found.protocol != exp.protocol(budget_name):
        return None
    return found if all(math.isfinite(r.seconds) for r in found.runs) else None
