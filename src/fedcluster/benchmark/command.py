"""``fedcluster benchmark``: list, estimate, run (or continue) the benchmark and write its page."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fedcluster.benchmark.methods import BenchMethod, load_plugins, select_methods
from fedcluster.benchmark.taxonomy import BUDGETS, DEFAULT_BUDGET, Scenario, select_scenarios, taxonomy
from fedcluster.config.bounds import MAX_SEEDS
from fedcluster.errors import UserError
from fedcluster.storage.paths import output_path

if TYPE_CHECKING:  # the parser and --list import nothing heavy
    from fedcluster.benchmark.plan import Benchmark
    from fedcluster.benchmark.records import Records

DEFAULT_OUT = "runs/benchmark"
PUBLISHED_PAGE = "docs/benchmark.md"
PUBLISHED_FOLDER = "docs/benchmark"
PUBLISHED_STORE = "docs/reproduction/store"  # the reproduction suite's store: runs they share are trained once
USER_STORE = "runs/reproduction/store"
MAX_MINUTES = 7 * 24 * 60


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--list", action="store_true", help="list the scenarios (the shift each carries) and the methods")
    p.add_argument("--methods", default=None, metavar="A,B | +NAME,-NAME",
                   help="a,b: these methods only; +name / -name: every registered method with one more or fewer")
    p.add_argument("--scenarios", default=None, metavar="A,B", help="these scenarios only (default: all)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0 … N−1 (default 3)")
    p.add_argument("--budget", default=DEFAULT_BUDGET, choices=list(BUDGETS),
                   help="; ".join(f"{b.name}: {b.about}" for b in BUDGETS.values()))
    p.add_argument("--choose-k", action="store_true",
                   help="give the fixed-K methods the K of best validation accuracy among 2 … 5 (never chosen by "
                        "the test clients) instead of the true K")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run up to N seeds' scenarios at once, each in its own process (default 1); same results")
    p.add_argument("--time-limit", type=float, default=None, metavar="MIN",
                   help="stop after MIN minutes: every finished run is already stored, and the same command again "
                        "continues from them")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra run-config override for every run (e.g. device=cuda, data_dir=DIR); repeatable")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE (dotted name or .py file) first: the methods it registers join the table")
    p.add_argument("--estimate", action="store_true",
                   help="measure what the budget needs on this machine (every method and scenario timed over a few "
                        "rounds on seed 0) instead of running it")
    p.add_argument("--report-only", action="store_true",
                   help="write the page from the stored records only: nothing is trained")
    p.add_argument("--publish", action="store_true",
                   help=f"write {PUBLISHED_PAGE} and its figures in {PUBLISHED_FOLDER}/ (run from the repository "
                        f"root), the runs kept in {PUBLISHED_STORE}")
    p.add_argument("--out", default=None, help=f"the folder of the page, records and figures (default {DEFAULT_OUT})")
    p.add_argument("--store", default=None, metavar="DIR",
                   help=f"the run store (default {USER_STORE}, the reproduction suite's; {PUBLISHED_STORE} with "
                        "--publish)")


def list_taxonomy(methods: Sequence[BenchMethod]) -> int:
    scenarios, note = taxonomy()
    width = max(len(s.name) for s in scenarios)
    print("scenarios (the taxonomy of heterogeneity):")
    for s in scenarios:
        print(f"  {s.name:<{width}}  {s.shift}")
        print(f"  {'':<{width}}  picture: {s.picture()}")
    if note:
        print(f"  {note}")
    width = max(len(m.name) for m in methods)
    print(f"methods ({len(methods)}, every registered one):")
    for m in methods:
        print(f"  {m.name:<{width}}  [{m.setting}] {m.description}")
    return 0


def check(args: argparse.Namespace) -> None:
    if not 1 <= args.seeds <= MAX_SEEDS:
        raise UserError(f"--seeds {args.seeds}: give at least 1 seed and at most {MAX_SEEDS}")
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: give at least 1 (the number of processes)")
    if args.time_limit is not None and not 0 < args.time_limit <= MAX_MINUTES:
        raise UserError(f"--time-limit {args.time_limit:g}: give a number of minutes above 0 and at most "
                        f"{MAX_MINUTES} (a week)")
    bad = [s for s in args.set if "=" not in s]
    if bad:
        raise UserError(f"--set {bad[0]!r} is not of the form key=value")
    if args.publish and args.budget == "tiny":
        raise UserError("--publish with --budget tiny would publish numbers that say nothing: publish the default "
                        "or large budget, or drop --publish to try the command in your own folder")
    if args.report_only and args.estimate:
        raise UserError("--report-only writes the page and --estimate times the budget: give one of them")


def command_line(args: argparse.Namespace) -> str:
    """The command that makes this page (for the page itself: no folder of this machine in it)."""
    parts = ["fedcluster benchmark"]
    if args.budget != DEFAULT_BUDGET:
        parts.append(f"--budget {args.budget}")
    for flag, value in (("--methods", args.methods), ("--scenarios", args.scenarios)):
        if value is not None:
            parts.append(f"{flag} {value}")
    if args.seeds != 3:
        parts.append(f"--seeds {args.seeds}")
    if args.choose_k:
        parts.append("--choose-k")
    parts += [f"--plugin {shlex.quote(p)}" for p in args.plugin]
    parts += [f"--set {shlex.quote(s)}" for s in args.set if not s.startswith("data_dir=")]
    if args.publish:
        parts.append("--publish")
    return " ".join(parts)


BUDGET_ORDER = ("tiny", "default", "large")
HELD = re.compile(r"^Budget `(\w+)`, (\d+) seed\(s\), (\d+) methods × (\d+) scenarios", re.MULTILINE)


def guard_published(page: Path, budget: str, seeds: int, methods: int, scenarios: int) -> None:
    """Refuse to replace a published page that holds a larger budget, more seeds, methods or scenarios."""
    found = HELD.search(page.read_text(encoding="utf-8")) if page.is_file() else None
    if found is None or found[1] not in BUDGET_ORDER:
        return
    held = (BUDGET_ORDER.index(found[1]), int(found[2]), int(found[3]), int(found[4]))
    asked = (BUDGET_ORDER.index(budget), seeds, methods, scenarios)
    if any(a < h for a, h in zip(asked, held, strict=True)):
        raise UserError(f"{page} holds the {found[1]} budget with {found[2]} seed(s), {found[3]} methods and "
                        f"{found[4]} scenarios; this call has {budget}, {seeds}, {methods} and {scenarios}: drop "
                        "--publish (the page goes to --out), or publish at least as much")


def folders(args: argparse.Namespace) -> tuple[Path, Path, Path, str]:
    """The page's path, the folder of its records and figures, the run store and the figure's link from the page."""
    if args.publish:
        if args.out is not None:
            raise UserError(f"--publish writes {PUBLISHED_PAGE}; leave out --out {args.out} (or drop --publish)")
        if not Path("docs").is_dir() or not Path("mkdocs.yml").is_file():
            raise UserError(f"--publish writes {PUBLISHED_PAGE} of a fedcluster checkout, which is not here: run it "
                            "from the repository root, or drop --publish to write your own folder")
        store = Path(args.store) if args.store else Path(PUBLISHED_STORE)
        return Path(PUBLISHED_PAGE), Path(PUBLISHED_FOLDER), store, "benchmark/heatmap.png"
    out = output_path(args.out or DEFAULT_OUT, f"--out {args.out or DEFAULT_OUT}", folder=True)
    store = output_path(args.store, f"--store {args.store}", folder=True) if args.store else Path(USER_STORE)
    return out / "benchmark.md", out, store, "heatmap.png"


def run_command(args: argparse.Namespace) -> int:
    load_plugins(list(args.plugin))
    if args.list:
        return list_taxonomy(select_methods(args.methods))
    from fedcluster.benchmark.plan import make
    from fedcluster.benchmark.records import Records

    check(args)
    scenarios = select_scenarios(args.scenarios)
    methods = select_methods(args.methods)
    budget = BUDGETS[args.budget]
    extra = list(args.set)
    if not any(s.split("=", 1)[0].strip() == "threads" for s in extra):
        extra.append("threads=1")
    exp = make(scenarios, methods, budget, args.plugin, args.choose_k, extra)
    page_path, folder, store_path, figure = folders(args)
    if args.publish and not args.estimate:
        guard_published(page_path, budget.name, args.seeds, len(exp.methods), len(exp.settings))
    if args.estimate:
        from fedcluster.benchmark.estimate import estimate_command

        return estimate_command(exp, budget.name, args.seeds, args.workers, folder)
    records = Records.load(folder / "records.json")
    if not args.report_only:
        stopped = run_missing(exp, budget.name, args.seeds, args.workers, args.time_limit, records, store_path)
        records = Records.load(folder / "records.json")  # the page from the kept records only, as a rebuild reads
        if stopped:
            write_page(exp, scenarios, methods, records, args, page_path, folder, figure)
            return 0
    written = write_page(exp, scenarios, methods, records, args, page_path, folder, figure)
    print(f"fedcluster benchmark: wrote {written}")
    return 0


def write_page(exp: Benchmark, scenarios: list[Scenario], methods: list[BenchMethod], records: Records,
               args: argparse.Namespace, page_path: Path, folder: Path, figure: str) -> Path:
    from fedcluster.benchmark.results_page import page

    _, note = taxonomy()
    chosen = {s.name for s in scenarios}
    text = page(exp, scenarios, methods, BUDGETS[args.budget], records, args.seeds, command_line(args),
                note if args.scenarios is None or "concept-drift" in chosen else None, figure, folder)
    page_path.parent.mkdir(parents=True, exist_ok=True)
    page_path.write_text(text, encoding="utf-8")
    return page_path


def run_missing(exp: Benchmark, budget: str, seeds: int, workers: int, minutes: float | None, records: Records,
                store_path: Path) -> bool:
    """Run every (seed, scenario, method) without a kept record, each record stored as it arrives; True when the
    time limit stopped it."""
    from fedcluster.benchmark.plan import pair_key
    from fedcluster.reproduce.parallel import parts, run_parts
    from fedcluster.reproduce.run_store import RunStore
    from fedcluster.reproduce.running import TimeLimit, time_limit

    store = RunStore(store_path)
    keys = {(s.name, m.label): pair_key(exp, s, m) for s in exp.settings for m in exp.methods}
    todo = {seed: {pair for pair, key in keys.items() if records.done(key, seed)} for seed in range(seeds)}
    wanted = seeds * len(keys)
    have = [sum(len(d) for d in todo.values())]
    left = wanted - have[0]
    if left == 0:
        return False
    t0 = time.perf_counter()
    trained: list[float] = []
    print(f"fedcluster benchmark: {left} of {wanted} runs to go ({len(exp.settings)} scenarios × "
          f"{len(exp.methods)} methods × {seeds} seeds); each is stored as it finishes", file=sys.stderr, flush=True)

    def emit(record: dict) -> None:
        records.add(record)
        records.save()
        have[0] += record["status"] in ("ok", "n/a", "diverged")
        if record["status"] == "ok" and not record.get("reused"):
            trained.append(float(record["seconds"]))
        done_here = len(trained)
        eta = ""
        if done_here:
            rate = (time.perf_counter() - t0) / done_here
            eta = f"; about {max(wanted - have[0], 0) * rate / 60:.1f} min left"
        if record["status"] != "ok":
            what = f"{record['status']}: {record.get('reason', '')[:80]}"
        else:
            m = record["metrics"]
            score = f"test MSE {m['mse']:.3g}" if m["global"] != m["global"] else f"global {m['global']:.1f}%"
            what = f"{score}, ARI {m['ari']:.2f}"
        print(f"[{have[0]}/{wanted}] seed {record['seed']} {record['setting']} {record['method']}: {what} "
              f"({record['seconds']:.1f} s{', from the run store' if record.get('reused') else ''}){eta}",
              file=sys.stderr, flush=True)

    pending = parts(exp, todo, by_run=False)
    try:
        with time_limit(minutes):
            if workers > 1 and len(pending) > 1:
                run_parts("fedcluster.benchmark.runner:run", exp, budget, pending, list(exp.extra), emit,
                          min(workers, len(pending)), (), str(store.root))
            else:
                from fedcluster.benchmark.runner import run

                for seed, done in todo.items():
                    run(exp, exp.budget(budget), seed, list(exp.extra), done, emit, store)
    except TimeLimit:
        print(f"fedcluster benchmark: the {minutes:g}-minute limit stopped it with {have[0]} of {wanted} runs "
              "stored; the same command again continues from them", file=sys.stderr)
        return True
    return False
