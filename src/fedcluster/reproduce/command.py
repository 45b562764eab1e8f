"""``fedcluster reproduce``: list the experiments, or run one over seeds and write its page and the summary."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fedcluster.config.bounds import MAX_SEEDS
from fedcluster.errors import UserError
from fedcluster.reproduce.experiments import EXPERIMENTS, UNAVAILABLE, get
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.running import (
    DEFAULT_OUT,
    PUBLISHED,
    guard_published,
    run_experiment,
)
from fedcluster.reproduce.spec import BUDGETS, Experiment
from fedcluster.storage.paths import output_path

if TYPE_CHECKING:
    from fedcluster.reproduce.run_store import RunStore

MAX_MINUTES = 7 * 24 * 60


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="experiment name (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--seeds", type=int, default=None,
                   help="number of seeds, 0 … N−1 (default 3; with --report-only: the seeds stored)")
    p.add_argument("--budget", default="small", choices=[*BUDGETS, "tiny"],
                   help="small: fewer clients and rounds, light models (each page gives the wall time it took); "
                        "protocol (the FedRC paper's entries): the paper's clients, rounds, batch, local steps and "
                        "corruptions with a light model a CPU runs in hours; "
                        "paper: the paper's clients, rounds and batch; tiny: a few seconds, to try the command "
                        "(its verdict says nothing about the paper)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto: CUDA when the build and PyTorch have it, else the CPU")
    p.add_argument("--out", default=None,
                   help=f"page directory; the summary goes to its parent (default {DEFAULT_OUT}; with --publish "
                        f"{PUBLISHED})")
    p.add_argument("--publish", action="store_true",
                   help=f"write the published pages of this checkout ({PUBLISHED} and docs/REPRODUCTION.md); "
                        "refused when they hold a larger budget or more seeds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra run-config override for every run (e.g. data_dir=DIR, threads=1); repeatable")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run up to N runs at once, each in its own process (default 1); without threads= in --set "
                        "each gets its share of the CPU cores. Results are the same as with one worker")
    p.add_argument("--time-limit", type=float, default=None, metavar="MIN",
                   help="stop after MIN minutes: the runs finished by then are stored (each as it finishes), those "
                        "under way are dropped; the same command again continues from the stored runs")
    p.add_argument("--store", default=None, metavar="DIR",
                   help="the run store: every finished run is kept there under a key of everything that decides its "
                        "result, and any later call (or another experiment) that needs the same run reads it instead "
                        "of training it (default: store/ in the page folder; docs/reproduction/store with --publish)")
    p.add_argument("--all", action="store_true", dest="queue",
                   help="the queue: every experiment not yet settled at --budget (no finished record at that budget "
                        "or a larger one with --seeds seeds), cheapest first, each published once all its seeds are "
                        "in (with --publish, its records kept in docs/reproduction/in-progress until then)")
    p.add_argument("--fresh", action="store_true",
                   help="move stored results aside and start afresh instead of continuing them")
    p.add_argument("--estimate", action="store_true",
                   help="measure what the budget needs on this machine instead of running it: every method and "
                        "setting runs a few rounds (seed 0), scaled to the budget's rounds and evaluations; kept in "
                        "NAME.estimate.json and quoted on the page while that budget has no results")
    p.add_argument("--report-only", "--rejudge", action="store_true", dest="report_only",
                   help="re-judge the stored results with the experiment's current check and rewrite NAME.md and "
                        "the summary (even unfinished results), without running; without NAME: every stored one")


def _state(stored: Stored | None) -> str:
    if stored is None:
        return "not yet run"
    return f"{stored.budget}, {stored.seeds} seeds" + ("" if stored.finished else ", incomplete")


def list_experiments(out: Path, published: Path | None) -> int:
    """One line per experiment: its state in ``out`` and, when ``published`` is another folder, the published one."""
    width = max(len(n) for n in (*EXPERIMENTS, *UNAVAILABLE))
    for name, exp in EXPERIMENTS.items():
        state = _state(Stored.load(out / f"{name}.json"))
        if published is not None:
            from fedcluster.reproduce.listing import stated

            shown = Stored.load(published / f"{name}.json")
            state += f"; published: {stated(published, shown)}" if shown is not None else ""
        print(f"{name:<{width}}  {exp.title} [{state}]")
    for name, item in UNAVAILABLE.items():
        print(f"{name:<{width}}  {item.title} [cannot run here: {item.needs}]")
    return 0


def pages_folder(args: argparse.Namespace) -> tuple[Path, bool]:
    """The folder the pages go to and whether it is the published one (--publish, or --out naming it)."""
    published = Path(PUBLISHED).resolve()
    if args.publish:
        if args.out is not None and Path(args.out).resolve() != published:
            raise UserError(f"--publish writes {PUBLISHED}; leave out --out {args.out} (or drop --publish)")
        if not published.is_dir():
            raise UserError(f"--publish writes {PUBLISHED} of a fedcluster checkout, which is not here; run it from "
                            "the repository root, or drop --publish to write your own folder")
    raw = args.out or (PUBLISHED if args.publish else DEFAULT_OUT)
    out = output_path(raw, f"--out {raw}", folder=True)
    return out, out.resolve() == published


def refuse_stale(exp: Experiment, stored: Stored) -> None:
    """Refuse to judge records made under another protocol than the spec now names (its page would describe runs
    that did not happen). Older files store only the budget's repr and cannot be told apart."""
    if stored.stale(exp.protocol(stored.budget)):
        raise UserError(f"{exp.name}: its stored records were run with other settings than the experiment now names; "
                        f"rerun it with `fedcluster reproduce {exp.name} --budget {stored.budget} --fresh`")


def report_all(args: argparse.Namespace, out: Path) -> int:
    """``--report-only`` without a name: re-judge every stored experiment in ``out`` and rewrite its page and the
    summary (nothing runs)."""
    from fedcluster.reproduce.pages import write_experiment, write_summary

    if args.seeds is not None:
        raise UserError("--seeds applies to one experiment: name it, or leave out --seeds to re-judge them all")
    found, stale = 0, []
    for name in EXPERIMENTS:
        stored = Stored.load(out / f"{name}.json")
        if stored is None:
            continue
        exp = get(name).trimmed(stored.budget)
        if stored.stale(exp.protocol(stored.budget)):  # its page stays as it was, describing the runs made
            stale.append(name)
            continue
        stored.finished = exp.runs_of(stored.seeds) <= stored.keys()
        write_experiment(exp, stored, out)
        found += 1
    if not found and not stale:
        raise UserError(f"{out} holds no stored results to report; run `fedcluster reproduce NAME` first")
    left = (f"; left {len(stale)} page(s) as they were, whose records were run with other settings than the "
            f"experiment now names ({', '.join(stale)}): rerun each with `--fresh`" if stale else "")
    print(f"re-judged {found} experiments in {out}{left}; wrote {write_summary(out)}")
    return 0


def check_common(args: argparse.Namespace) -> None:
    """Refuse, in one line, options that no run can use."""
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: give at least 1 (the number of runs at once)")
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and 0 < args.time_limit <= MAX_MINUTES):
        raise UserError(f"--time-limit {args.time_limit:g}: give a number of minutes above 0 and at most "
                        f"{MAX_MINUTES} (a week)")
    bad = [s for s in args.set if "=" not in s]
    if bad:
        raise UserError(f"--set {bad[0]!r} is not of the form key=value")


def store_folder(args: argparse.Namespace, out: Path, publishing: bool) -> RunStore:
    """The run store: --store, else store/ beside the published pages or in the page directory."""
    from fedcluster.reproduce.run_store import RunStore

    if args.store is not None:
        return RunStore(output_path(args.store, f"--store {args.store}", folder=True))
    return RunStore((Path(PUBLISHED) if publishing else out) / "store")


def run_command(args: argparse.Namespace) -> int:
    out, publishing = pages_folder(args)
    if args.queue:
        from fedcluster.reproduce.queue import run_queue

        if args.name or args.list or args.report_only or args.estimate or args.fresh:
            raise UserError("--all runs every unsettled experiment: leave out the name, --list, --report-only, "
                            "--estimate and --fresh")
        check_common(args)
        return run_queue(args, out, publishing, store_folder(args, out, publishing))
    if args.list:
        published = Path(PUBLISHED)
        return list_experiments(out, None if publishing or not published.is_dir() else published)
    if not args.name and args.report_only:
        return report_all(args, out)
    if not args.name:
        raise UserError("fedcluster reproduce needs an experiment name or --list; see `fedcluster reproduce --list`")
    try:
        exp = get(args.name).trimmed(args.budget)
    except KeyError as e:
        raise UserError(str(e.args[0])) from None
    if args.budget not in ("tiny", *exp.budgets):
        raise UserError(f"{exp.name} has no {args.budget} budget; use --budget "
                        + " or ".join(b for b in BUDGETS if b in exp.budgets))
    if args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS:
        raise UserError(f"--seeds {args.seeds}: give at least 1 seed and at most {MAX_SEEDS}")
    check_common(args)
    from fedcluster.reproduce.pages import write_experiment, write_summary

    path = out / f"{exp.name}.json"
    if args.estimate:
        return estimate_command(exp, args, out, path)
    if args.report_only:
        stored = Stored.load(path)
        if stored is None:
            raise UserError(f"{path} holds no results to report; run `fedcluster reproduce {exp.name}` first")
        exp = get(exp.name).trimmed(stored.budget)
        refuse_stale(exp, stored)
        if publishing and stored.finished and args.seeds is not None:
            guard_published(path, stored.budget, args.seeds, "re-judging")
        if args.seeds is not None:
            stored.seeds = min(args.seeds, stored.seeds)  # e.g. --seeds 2: the seeds already complete
        stored.finished = exp.runs_of(stored.seeds) <= stored.keys()
        page = write_experiment(exp, stored, out)  # the stored file itself is left as it is
        print(f"wrote {page} and {write_summary(out, {exp.name: stored})}")
        return 0
    args.seeds = 3 if args.seeds is None else args.seeds
    if publishing:
        guard_published(path, args.budget, args.seeds, "a run")
    result = run_experiment(exp, args, out, path, store_folder(args, out, publishing))
    if result is None:
        return 0
    print(f"{exp.name}: {result.wall_seconds / 60:.1f} min; wrote {write_experiment(exp, result, out)} and "
          f"{write_summary(out)}")
    return 0


def estimate_command(exp: Experiment, args: argparse.Namespace, out: Path, path: Path) -> int:
    """``--estimate``: time the budget's runs, store the estimate, and rewrite the page if results are stored."""
    from fedcluster.reproduce.estimate import estimate
    from fedcluster.reproduce.pages import write_experiment
    from fedcluster.reproduce.run_common import device_overrides

    _, dev_over = device_overrides(args.device)
    out.mkdir(parents=True, exist_ok=True)
    found = estimate(exp, args.budget, [*args.set, *dev_over], out, lambda line: print(line, file=sys.stderr))
    seeds = 3 if args.seeds is None else args.seeds
    from fedcluster.config.validation import usable_cpus

    workers = args.workers if args.workers > 1 else usable_cpus()
    parallel = (f" (with --workers {workers}: about {found.wall_hours(seeds, workers):.2f} hours of wall time)"
                if workers > 1 else "")
    print(f"{exp.name} at the {args.budget} budget: about {found.cpu_hours(seeds):.2f} CPU hours for {seeds} seed(s), "
          f"one run at a time{parallel}; wrote {out / (exp.name + '.estimate.json')}")
    stored = Stored.load(path)
    if stored is not None:
        print(f"wrote {write_experiment(get(exp.name).trimmed(stored.budget), stored, out)}")
    return 0
