"""``fedcluster reproduce``: list the experiments, or run one over seeds and write its page and the summary."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path

from fedcluster.config.bounds import MAX_SEEDS
from fedcluster.errors import UserError
from fedcluster.reproduce.catalogue import EXPERIMENTS, UNAVAILABLE, get
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.spec import BUDGETS, Experiment
from fedcluster.storage.paths import output_path

RUNNERS = {"suite": "run_suite:run", "mixreg": "run_synthetic:run_mixreg", "lines": "run_synthetic:run_lines",
           "fedmd-rotation": "run_fedmd_rotation:run"}
DEFAULT_OUT = "runs/reproduction"  # a user's runs: pages here, the summary in runs/REPRODUCTION.md
PUBLISHED = "docs/reproduction"  # the pages of a fedcluster checkout: written only with --publish
BUDGET_RANK = {"tiny": 0, "small": 1, "protocol": 2, "paper": 3}


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
                   help="run up to N parts at once (a part: one seed's runs of one setting), each in its own process "
                        "(default 1); without threads= in --set each gets its share of the CPU cores. Results are "
                        "the same as with one worker")
    p.add_argument("--time-limit", type=float, default=None, metavar="MIN",
                   help="stop after MIN minutes: the runs finished by then are stored (each as it finishes), the one "
                        "under way is dropped; the same command again continues from the stored runs")
    p.add_argument("--fresh", action="store_true",
                   help="move stored results aside and start afresh instead of continuing them")
    p.add_argument("--estimate", action="store_true",
                   help="measure what the budget needs on this machine instead of running it: every method and "
                        "setting runs a few rounds (seed 0), scaled to the budget's rounds and evaluations; kept in "
                        "NAME.estimate.json and quoted on the page while that budget has no results")
    p.add_argument("--report-only", "--rejudge", action="store_true", dest="report_only",
                   help="re-judge the stored results with the experiment's current check and rewrite NAME.md and "
                        "the summary (even unfinished results), without running; without NAME: every stored one")


class TimeLimit(BaseException):  # not an Exception: no handler of a run may take it for the run's own error
    """``--time-limit`` ran out."""


@contextlib.contextmanager
def time_limit(minutes: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimit` in this (main) thread once ``minutes`` have passed (nothing when None)."""
    if minutes is None:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimeLimit

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, minutes * 60)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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


def guard_published(path: Path, budget: str, seeds: int, what: str) -> None:
    """Refuse to replace published results by a smaller budget or fewer seeds (one line, exit 2)."""
    held = Stored.load(path)
    if held is None:
        return
    smaller = BUDGET_RANK.get(budget, 0) < BUDGET_RANK.get(held.budget, 0)
    fewer = seeds < held.seeds  # at any budget: a larger budget over fewer seeds says less about the noise
    if smaller or fewer:
        raise UserError(f"{path} holds {held.budget}-budget results over {held.seeds} seeds; {what} with "
                        f"{budget}, {seeds} seed(s) would replace them: drop --publish (your runs go to "
                        f"{DEFAULT_OUT}) or use --budget {held.budget} --seeds {held.seeds} or more")


def refuse_stale(exp: Experiment, stored: Stored) -> None:
    """Refuse to judge records made under another protocol than the spec now names (its page would describe runs
    that did not happen). Older files store only the budget's repr and cannot be told apart."""
    if stored.spec.startswith("protocol ") and stored.spec != exp.protocol(stored.budget):
        raise UserError(f"{exp.name}: its stored records were run with other settings than the experiment now names; "
                        f"rerun it with `fedcluster reproduce {exp.name} --budget {stored.budget} --fresh`")


def report_all(args: argparse.Namespace, out: Path) -> int:
    """``--report-only`` without a name: re-judge every stored experiment in ``out`` and rewrite its page and the
    summary (nothing runs)."""
    from fedcluster.reproduce.report import write_experiment, write_summary

    if args.seeds is not None:
        raise UserError("--seeds applies to one experiment: name it, or leave out --seeds to re-judge them all")
    found = 0
    for name in EXPERIMENTS:
        stored = Stored.load(out / f"{name}.json")
        if stored is None:
            continue
        exp = get(name).trimmed(stored.budget)
        refuse_stale(exp, stored)
        stored.finished = exp.runs_of(stored.seeds) <= stored.keys()
        write_experiment(exp, stored, out)
        found += 1
    if not found:
        raise UserError(f"{out} holds no stored results to report; run `fedcluster reproduce NAME` first")
    print(f"re-judged {found} experiments in {out}; wrote {write_summary(out)}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    out, publishing = pages_folder(args)
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
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: give at least 1 (the number of parts run at once)")
    if args.time_limit is not None and (args.time_limit <= 0 or args.workers > 1):
        raise UserError(f"--time-limit {args.time_limit:g}: give a positive number of minutes, with --workers 1")
    bad = [s for s in args.set if "=" not in s]
    if bad:
        raise UserError(f"--set {bad[0]!r} is not of the form key=value")
    from fedcluster.reproduce.report import write_experiment, write_summary
    from fedcluster.reproduce.run_common import device_overrides

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
    device, dev_over = device_overrides(args.device)
    budget = exp.budget(args.budget)
    out.mkdir(parents=True, exist_ok=True)
    stored = Stored.load(path)
    protocol = exp.protocol(args.budget)
    if stored is not None and (args.fresh or not stored.matches(args.budget, device, list(args.set), protocol,
                                                                 repr(budget))):
        kept = stored.move_aside(path, time.strftime("%Y%m%d-%H%M%S"))  # never lose results
        print(f"{path}: earlier results (another budget, device, --set or protocol, or --fresh) moved to {kept}; "
              "starting afresh", file=sys.stderr)
        stored = None
    if stored is None:
        stored = Stored(exp.name, args.budget, args.seeds, device, list(args.set))
    stored.seeds, stored.finished, stored.spec = args.seeds, False, protocol
    module, fn = RUNNERS[exp.kind].split(":")
    runner = getattr(import_module(f"fedcluster.reproduce.{module}"), fn)
    t_start = time.perf_counter()
    wall0 = stored.wall_seconds
    wanted = exp.runs_of(args.seeds)
    have = wanted & stored.keys()

    def emit(record: dict) -> None:
        record["curve"] = [[t, float(f"{v:.5g}")] for t, v in record["curve"]]  # compact file, plenty for a plot
        stored.records.append(record)
        stored.wall_seconds = wall0 + time.perf_counter() - t_start
        stored.date = time.strftime("%Y-%m-%d")
        stored.save(path)
        values = ", ".join(f"{k} {v:.4g}" for k, v in record["metrics"].items())
        key = (record["seed"], record["setting"], record["method"])
        have.update({key} & wanted)
        print(f"{exp.name} seed {record['seed']} {record['setting']} {record['method']}: {values} "
              f"({record['seconds']:.0f} s; {len(have)} of {len(wanted)} runs)", file=sys.stderr, flush=True)

    extra = [*args.set, *dev_over]
    todo = {seed: stored.done(seed) for seed in range(args.seeds)}
    from fedcluster.reproduce.parallel import parts, run_parts

    pending = parts(exp, todo)
    workers = min(args.workers, len(pending))
    if workers > 1:
        from fedcluster.config.validation import usable_cpus

        if not any(o.split("=", 1)[0].strip() == "threads" for o in args.set):  # share the cores, not each all
            extra.append(f"threads={max(1, usable_cpus() // workers)}")
        run_parts(f"fedcluster.reproduce.{RUNNERS[exp.kind]}", exp.name, args.budget, pending, extra, emit, workers,
                  list(stored.records))
    else:
        try:
            with time_limit(args.time_limit):
                for seed, done in todo.items():
                    runner(exp, budget, seed, extra, done, emit)
        except TimeLimit:
            print(f"{exp.name}: the {args.time_limit:g}-minute limit stopped it with {len(have)} of {len(wanted)} runs "
                  f"stored in {path}; the same command again continues from them", file=sys.stderr)
            return 0
    stored.finished = True
    stored.wall_seconds = wall0 + time.perf_counter() - t_start
    stored.date = time.strftime("%Y-%m-%d")
    stored.save(path)
    page = write_experiment(exp, stored, out)
    summary = write_summary(out)
    print(f"{exp.name}: {stored.wall_seconds / 60:.1f} min; wrote {page} and {summary}")
    return 0


def estimate_command(exp: Experiment, args: argparse.Namespace, out: Path, path: Path) -> int:
    """``--estimate``: time the budget's runs, store the estimate, and rewrite the page if results are stored."""
    from fedcluster.reproduce.estimate import estimate
    from fedcluster.reproduce.report import write_experiment
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
