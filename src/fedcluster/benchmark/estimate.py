"""``fedcluster benchmark --estimate``: what a budget needs on this machine, measured with the reproduction suite's
timer (:mod:`fedcluster.reproduce.estimate`): every (scenario, method) runs a few rounds on seed 0's federation, and
its time is scaled to the budget's rounds and evaluations. Kept in ``benchmark.estimate.json`` beside the page."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from fedcluster.benchmark.methods import CHOOSE_K
from fedcluster.benchmark.plan import Benchmark
from fedcluster.errors import UserError


def estimate_command(exp: Benchmark, budget_name: str, seeds: int, workers: int, folder: Path) -> int:
    from fedcluster.reproduce.estimate import TIMED_ROUNDS, Estimate, cost_of, timed_run
    from fedcluster.reproduce.federations import shrink
    from fedcluster.reproduce.run_common import federation
    from fedcluster.reproduce.run_suite import method_overrides

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    budget = exp.budget(budget_name)
    found = Estimate(exp.name, budget_name, exp.protocol(budget_name), list(exp.extra), time.strftime("%Y-%m-%d"))
    total = len(exp.settings) * len(exp.methods)
    say(f"fedcluster benchmark: timing {total} run(s) over {TIMED_ROUNDS} rounds each at the {budget_name} budget")
    refused = 0
    for setting in exp.settings:
        t0 = time.perf_counter()
        base = [*setting.overrides, "seed=0", *exp.extra]
        fed = federation(base)
        if float(setting.params["fraction"]) < 1 or setting.params["test_size"]:
            fed = shrink(fed, float(setting.params["fraction"]), int(setting.params["test_size"]), 0)
        found.build += time.perf_counter() - t0
        for method in exp.methods:
            over = method_overrides(setting, method, base, fed)
            try:
                wall, seconds, evaluation = timed_run([*over, f"rounds={TIMED_ROUNDS}",
                                                       f"eval_every={TIMED_ROUNDS}"], fed)
            except UserError:
                refused += 1  # n/a: the method refuses the scenario at once
                continue
            cost = cost_of(setting.name, method.label, over, budget.rounds, wall, seconds, evaluation)
            found.runs.append(cost)
            if exp.choose_k and method.label in exp.fixed_k:  # one run per K tried
                found.runs.extend(cost for _ in CHOOSE_K[1:])
            say(f"[{len(found.runs) + refused}/{total}] {setting.name} {method.label}: {cost.seconds:.1f} s a run")
    found.load_average = os.getloadavg()[0] / max(os.cpu_count() or 1, 1)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "benchmark.estimate.json"
    found.save(path)
    parallel = (f"; with --workers {workers}: about {found.wall_hours(seeds, workers):.2f} hours of wall time"
                if workers > 1 else "")
    busy = (f" (measured with a load average of {found.load_average:.1f} a core from other work: a quiet machine "
            "takes less)" if found.load_average > 1.2 else "")
    print(f"the {budget_name} budget: about {found.cpu_hours(seeds):.2f} CPU hours for {seeds} seed(s), one run at a "
          f"time{parallel}{busy}; {refused} (scenario, method) pairs refused (n/a); wrote {path}")
    return 0
