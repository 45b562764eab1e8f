"""``fedcluster reproduce``: list the experiments, or run one over seeds and write its page and the summary."""

from __future__ import annotations

import argparse
import sys
import time
from importlib import import_module
from pathlib import Path

from fedcluster.errors import UserError
from fedcluster.reproduce.catalogue import EXPERIMENTS, UNAVAILABLE, get
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.spec import BUDGETS
from fedcluster.storage.paths import output_path

RUNNERS = {"suite": "run_suite:run", "mixreg": "run_synthetic:run_mixreg", "lines": "run_synthetic:run_lines",
           "fedmd-rotation": "run_fedmd_rotation:run"}
DEFAULT_OUT = "docs/reproduction"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="experiment name (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--seeds", type=int, default=None,
                   help="number of seeds, 0 … N−1 (default 3; with --report-only: the seeds stored)")
    p.add_argument("--budget", default="small", choices=[*BUDGETS, "tiny"], metavar="{small,paper}",
                   help="small: sized for about 20 min on 2 CPU cores; paper: the paper's clients and rounds "
                        "(tiny, for the tests: seconds)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto: CUDA when the build and PyTorch have it, else the CPU")
    p.add_argument("--out", default=DEFAULT_OUT, help="page directory; the summary goes to its parent")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra run-config override for every run (e.g. data_dir=DIR, threads=1); repeatable")
    p.add_argument("--fresh", action="store_true",
                   help="move stored results aside and start afresh instead of continuing them")
    p.add_argument("--report-only", "--rejudge", action="store_true", dest="report_only",
                   help="re-judge the stored results with the experiment's current check and rewrite NAME.md and "
                        "the summary (even unfinished results), without running")


def list_experiments(out: Path) -> int:
    width = max(len(n) for n in (*EXPERIMENTS, *UNAVAILABLE))
    for name, exp in EXPERIMENTS.items():
        stored = Stored.load(out / f"{name}.json")
        state = "not yet run" if stored is None else f"{stored.budget}, {stored.seeds} seeds" + (
            "" if stored.finished else ", incomplete")
        print(f"{name:<{width}}  {exp.title} [{state}]")
    for name, item in UNAVAILABLE.items():
        print(f"{name:<{width}}  {item.title} [cannot run here: {item.needs}]")
    return 0


def run_command(args: argparse.Namespace) -> int:
    out = output_path(args.out, f"--out {args.out}", folder=True)
    if args.list:
        return list_experiments(out)
    if not args.name:
        raise UserError("fedcluster reproduce needs an experiment name or --list; see `fedcluster reproduce --list`")
    try:
        exp = get(args.name).trimmed(args.budget)
    except KeyError as e:
        raise UserError(str(e.args[0])) from None
    if args.seeds is not None and args.seeds < 1:
        raise UserError(f"--seeds {args.seeds}: give at least 1 seed")
    bad = [s for s in args.set if "=" not in s]
    if bad:
        raise UserError(f"--set {bad[0]!r} is not of the form key=value")
    from fedcluster.reproduce.report import write_experiment, write_summary
    from fedcluster.reproduce.run_common import device_overrides

    path = out / f"{exp.name}.json"
    if args.report_only:
        stored = Stored.load(path)
        if stored is None:
            raise UserError(f"{path} holds no results to report; run `fedcluster reproduce {exp.name}` first")
        exp = get(exp.name).trimmed(stored.budget)
        if args.seeds is not None:
            stored.seeds = min(args.seeds, stored.seeds)  # e.g. --seeds 2: the seeds already complete
        want = {(seed, s.name, m.label) for seed in range(stored.seeds) for s in exp.settings for m in exp.methods
                if s.runs(m)}
        stored.finished = want <= {(r["seed"], r["setting"], r["method"]) for r in stored.records}
        page = write_experiment(exp, stored, out)  # the stored file itself is left as it is
        print(f"wrote {page} and {write_summary(out, {exp.name: stored})}")
        return 0
    args.seeds = 3 if args.seeds is None else args.seeds
    device, dev_over = device_overrides(args.device)
    budget = exp.budget(args.budget)
    out.mkdir(parents=True, exist_ok=True)
    stored = Stored.load(path)
    if stored is not None and (args.fresh or not stored.matches(args.budget, device, list(args.set), repr(budget))):
        kept = stored.move_aside(path, time.strftime("%Y%m%d-%H%M%S"))  # never lose results
        print(f"{path}: earlier results (another budget/device/--set, or --fresh) moved to {kept}; starting afresh",
              file=sys.stderr)
        stored = None
    if stored is None:
        stored = Stored(exp.name, args.budget, args.seeds, device, list(args.set))
    stored.seeds, stored.finished, stored.spec = args.seeds, False, repr(budget)
    module, fn = RUNNERS[exp.kind].split(":")
    runner = getattr(import_module(f"fedcluster.reproduce.{module}"), fn)
    t_start = time.perf_counter()
    wall0 = stored.wall_seconds

    def emit(record: dict) -> None:
        record["curve"] = [[t, float(f"{v:.5g}")] for t, v in record["curve"]]  # compact file, plenty for a plot
        stored.records.append(record)
        stored.wall_seconds = wall0 + time.perf_counter() - t_start
        stored.date = time.strftime("%Y-%m-%d")
        stored.save(path)
        values = ", ".join(f"{k} {v:.4g}" for k, v in record["metrics"].items())
        print(f"{exp.name} seed {record['seed']} {record['setting']} {record['method']}: {values} "
              f"({record['seconds']:.0f} s)", file=sys.stderr, flush=True)

    for seed in range(args.seeds):
        runner(exp, budget, seed, [*args.set, *dev_over], stored.done(seed), emit)
    stored.finished = True
    stored.wall_seconds = wall0 + time.perf_counter() - t_start
    stored.date = time.strftime("%Y-%m-%d")
    stored.save(path)
    page = write_experiment(exp, stored, out)
    summary = write_summary(out)
    print(f"{exp.name}: {stored.wall_seconds / 60:.1f} min; wrote {page} and {summary}")
    return 0
