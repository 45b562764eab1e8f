"""The ``fedcluster`` command line: run, demo, resume, list, scenario, report, compare, sweep, init, benchmark.

Every user mistake (unknown key or name, wrong type, bad range, missing file) ends with one line on
stderr naming what is wrong and the valid choices, and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import sys
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fedcluster.errors import DivergedError, InterruptedRun, UserError, did_you_mean

EXIT_USAGE = 2  # bad input, an unusable file or folder (including a full disk)
EXIT_DIVERGED = 3  # non-finite losses or weights: the run stopped, its last checkpoint kept
EXIT_INTERRUPTED = 130  # Ctrl-C


class StartupInterrupted(KeyboardInterrupt):
    """Ctrl-C before the first round: nothing was run, so there is nothing to resume."""


@contextmanager
def starting_up() -> Iterator[None]:
    try:
        yield
    except KeyboardInterrupt:
        raise StartupInterrupted from None


def one_line(text: str) -> str:
    """A message of several lines as one: its lines joined by "; ", the items of a "- " list by ", "."""
    parts: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if line.startswith("- ") and parts:
            parts[-1] += (" " if parts[-1].endswith(":") else ", ") + line[2:]
        elif line:
            parts.append(line)
    return "; ".join(p.rstrip(";") for p in parts)


def _split_args(items: list[str]) -> tuple[str | None, list[str]]:
    """The optional leading CONFIG.yaml and the key=value overrides."""
    if items and "=" not in items[0]:
        return items[0], items[1:]
    return None, items


def cmd_run(args: argparse.Namespace) -> int:
    from fedcluster.config.run_config import load_raw, resolve

    if not args.items:  # the README's first command
        return cmd_demo(argparse.Namespace(out=None))
    path, overrides = _split_args(args.items)
    for extra in overrides:
        if "=" not in extra:
            raise UserError(f"argument {extra!r} is not of the form key=value (only the first argument may be "
                            "a config file)")
    with starting_up():
        cfg, typed = resolve(load_raw(path, overrides))  # a bad config fails before the engine (torch) loads
        from fedcluster.app import launch
        from fedcluster.engine.distributed.env import in_torchrun, world_from_env

        if cfg.ranks > 1 and not in_torchrun():  # ranks=N: start N processes under torchrun
            return launch.launch_run(args.items, cfg)
        run = launch.new_run(cfg, typed)
    lead = world_from_env()[0] == 0  # under torchrun only rank 0 speaks
    if lead:  # said once the trackers have started, so that one that cannot start is said first
        run.announcement = run.fed.summary()
    summary = run.execute()
    if lead:
        _report(summary)
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from fedcluster.app import launch
    from fedcluster.engine.distributed.env import in_torchrun, world_from_env
    from fedcluster.tracking.resume import plan_resume

    path = Path(args.run_dir)
    if world_from_env()[0] > 0:  # under torchrun: rank 0 locks, checks and writes the directory
        return launch.resume_follower(path, args.overrides)
    if not in_torchrun() and (path / "config.yaml").is_file():
        ranks = launch.follower_resume(path, args.overrides)[0].ranks
        if ranks > 1:  # the run's (or the override's) ranks=N: start N processes under torchrun
            return launch.launch_resume(path, args.overrides, ranks)
    plan = plan_resume(path, args.overrides)
    if plan.finished:
        plan.run_dir.release()
        print(f"fedcluster: {plan.run_dir.path} has finished all {plan.done} rounds; nothing to do "
              f"(pass rounds=N with N > {plan.done} to extend it)")
        return 0
    summary = launch.new_run(plan.cfg, plan.typed, resume=True, run_dir=plan.run_dir).execute()
    _report(summary)
    return 0


def _report(summary: dict) -> None:
    final = summary["final"]
    print(f"done: {summary['rounds']} rounds in {summary['wall_seconds']:.1f}s; final val_acc "
          f"{final.get('val_acc', float('nan')):.4f}, test_acc {final.get('test_acc', float('nan')):.4f}, "
          f"ari {final.get('ari', 0):.3f}, clusters {final.get('num_clusters')}; results in {summary['run_dir']}")


def cmd_list(args: argparse.Namespace) -> int:
    from fedcluster.catalog.registry import REGISTRIES

    if args.name is not None and args.name not in REGISTRIES:
        from fedcluster.app.describe import describe_name

        print(describe_name(args.name))
        return 0
    for title, reg in REGISTRIES.items():
        if args.name and args.name != title:
            continue
        print(f"{title}:")
        names = reg.descriptions()
        width = max(map(len, names))
        for name, description in names.items():
            print(f"  {name:<{width}}  {description}")
    if args.name is None:
        print("\n`fedcluster list NAME` shows the typed parameters of one of them (e.g. `fedcluster list ifca`).")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from fedcluster.app.demo import run_demo

    return run_demo(args.out)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from fedcluster.reproduce.command import run_command

    return run_command(args)


def cmd_benchmark(args: argparse.Namespace) -> int:
    from fedcluster.benchmark.command import run_command

    return run_command(args)


def cmd_scenario(args: argparse.Namespace) -> int:
    from fedcluster.data.overview import inspect_scenario

    return inspect_scenario(args.scenario, args.overrides, args.out)


def cmd_report(args: argparse.Namespace) -> int:
    from fedcluster.tracking.run_figures import report_run

    return report_run(Path(args.run_dir))


def cmd_compare(args: argparse.Namespace) -> int:
    from fedcluster.app.sweep.command import compare_sweep, is_sweep_dir
    from fedcluster.tracking.compare import compare_runs

    if len(args.run_dirs) == 1 and is_sweep_dir(args.run_dirs[0]):  # a sweep's folder: its table and picture
        return compare_sweep(args.run_dirs[0], args.out)
    return compare_runs(args.run_dirs, args.by, args.out)


def cmd_init(args: argparse.Namespace) -> int:
    from fedcluster.config.shipped import FOLDER, copy_into

    written, kept = copy_into(args.folder, force=args.force)
    target = Path(args.folder) / FOLDER
    print(f"fedcluster init: wrote {len(written)} of the {len(written) + len(kept)} config files into {target}"
          + (f"; kept {len(kept)} already there (--force replaces them): {', '.join(p.name for p in kept)}"
             if kept else ""))
    print(f"next: fedcluster run {target / 'demo.yaml'} algorithm=ifca algorithm.num_clusters=3")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from fedcluster.app.sweep.command import run_sweep

    return run_sweep(args)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one ``fedcluster: error:`` line (exit 2) like every other mistake."""

    def error(self, message: str) -> typing.NoReturn:
        message = " ".join(message.split())
        wrong = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)  # a misspelt subcommand
        hint = did_you_mean(wrong[1], re.findall(r"'([^']*)'", wrong[2])) if wrong else ""  # or option value
        self.exit(EXIT_USAGE, f"fedcluster: error: {message};{hint} see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    from fedcluster._version import __version__
    from fedcluster.app.describe import run_keys_help
    from fedcluster.reproduce.command import add_arguments as add_reproduce_arguments

    p = OneLineParser(prog="fedcluster", description="Clustered federated learning.")
    p.add_argument("--version", action="version", version=f"fedcluster {__version__}")
    sub = p.add_subparsers(dest="command")
    r = sub.add_parser("run", help="run an experiment: fedcluster run [CONFIG.yaml] [key=value ...]",
                       description="Run one experiment from a YAML file and/or key=value overrides; with no "
                                   "arguments, run the demo (see `fedcluster demo`).",
                       epilog=run_keys_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("items", nargs="*", metavar="CONFIG.yaml | key=value")
    r.set_defaults(fn=cmd_run)
    dm = sub.add_parser("demo", help="FedAvg vs CFL on the embedded digits: what clustering is for (< 1 min)")
    dm.add_argument("--out", default=None, help="folder of the two runs (default: runs/<time>-demo/)")
    dm.set_defaults(fn=cmd_demo)
    rs = sub.add_parser("resume", help="continue an interrupted run from its last checkpoint")
    rs.add_argument("run_dir")
    rs.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. rounds=200 to extend a run")
    rs.set_defaults(fn=cmd_resume)
    sc = sub.add_parser("scenario", help="build a federation, print its summary and draw it")
    sc.add_argument("scenario")
    sc.add_argument("overrides", nargs="*", metavar="key=value", help="dataset=..., scenario.<name>=...")
    sc.add_argument("--out", default=None, help="picture path (default: runs/scenarios/SCENARIO-DATASET.png)")
    sc.set_defaults(fn=cmd_scenario)
    rr = sub.add_parser("reproduce", help="a paper's headline result, paper vs ours over seeds (--list)")
    add_reproduce_arguments(rr)
    rr.set_defaults(fn=cmd_reproduce)
    from fedcluster.benchmark.command import add_arguments as add_benchmark_arguments

    bm = sub.add_parser("benchmark", help="every method against every kind of shift: one table per scenario, a "
                                          "heatmap of ranks, which method for which shift (--list)",
                        description="Run every registered method on a fixed taxonomy of heterogeneity scenarios "
                                    "over seeds; resumable, every finished run kept in the run store.")
    add_benchmark_arguments(bm)
    bm.set_defaults(fn=cmd_benchmark)
    rp = sub.add_parser("report", help="draw a finished run's plots (cluster-vs-concept/class/style heatmaps)")
    rp.add_argument("run_dir")
    rp.set_defaults(fn=cmd_report)
    cp = sub.add_parser("compare", help="compare runs: a mean ± sd table over seeds and curves on shared axes")
    cp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (or folders holding them)")
    cp.add_argument("--by", default="algorithm", help="config key that labels the groups (default: algorithm)")
    cp.add_argument("--out", default=None, help="output folder (default: compare-TIME beside the first run)")
    cp.set_defaults(fn=cmd_compare)
    sw = sub.add_parser("sweep", help="a grid of runs over keys and seeds (key=v1,v2 ...), resumable, with a table "
                                      "of mean ± sd over seeds and the best setting per method",
                        description="Run every combination of the values given (key=v1,v2,...), each an ordinary "
                                    "run directory in the sweep's folder; the same command again skips finished "
                                    "runs and resumes interrupted ones. Example: fedcluster sweep configs/demo.yaml "
                                    "algorithm=ifca,fedrc algorithm.num_clusters=2,3,4 lr=0.01,0.1 seed=0,1,2")
    sw.add_argument("items", nargs="+", metavar="CONFIG.yaml | key=v1,v2,...",
                    help="an optional config file, then keys with one value (fixed) or several (swept)")
    sw.add_argument("--workers", type=int, default=1, help="runs at once, in as many long-lived worker processes "
                                                           "(default 1)")
    sw.add_argument("--max-runs", type=int, default=1000, metavar="N",
                    help="refuse a grid of more than N runs (default 1000), a guard against a mistyped range")
    sw.add_argument("--out", default=None, help="the sweep's folder (default runs/sweep-CONFIG; the same command "
                                                "again continues it)")
    sw.set_defaults(fn=cmd_sweep)
    ls = sub.add_parser("list", help="list registered algorithms, datasets, scenarios and models, "
                                     "or the parameters of one of them")
    ls.add_argument("name", nargs="?", metavar="KIND | NAME",
                    help="algorithms, datasets, scenarios or models; or a name (e.g. fedrc) for its parameters")
    ls.set_defaults(fn=cmd_list)
    it = sub.add_parser("init", help="copy the example and paper configs into FOLDER/configs to edit")
    it.add_argument("folder", nargs="?", default=".", metavar="FOLDER", help="default: the current folder")
    it.add_argument("--force", action="store_true",
                    help="replace config files already there with the shipped ones (e.g. after an upgrade)")
    it.set_defaults(fn=cmd_init)
    _add_flower(sub)
    return p


def _add_flower(sub: argparse._SubParsersAction) -> None:
    """``fedcluster flower simulate | serve | node`` (fedcluster.flower; needs the ``flower`` extra)."""
    if importlib.util.find_spec("flwr") is None:  # Flower not installed: the subcommand says how to get it
        fl = sub.add_parser("flower", help="run a method on Flower (pip install 'fedcluster[flower]')")
        fl.add_argument("rest", nargs=argparse.REMAINDER)
        fl.set_defaults(fn=_no_flower)
        return
    from fedcluster.flower.commands import add_parser

    add_parser(sub)


def _no_flower(args: argparse.Namespace) -> int:
    raise UserError("Flower is not installed: pip install 'fedcluster[flower]' (or bash scripts/install.sh)")


def _user_facing(e: BaseException) -> bool:
    """A UserError or a missing data set (checked without importing the data modules for `list`/--help)."""
    sources = sys.modules.get("fedcluster.data.sources.base")
    return isinstance(e, UserError) or (sources is not None and isinstance(e, sources.DatasetNotFoundError))


def _speaks() -> bool:
    """Whether this process prints the one-line report: every process but torchrun's ranks > 0 (a ``RANK`` left
    by an outer job without torchrun's ``MASTER_ADDR`` does not silence it)."""
    try:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return True
    return not (os.environ.get("MASTER_ADDR") and 0 < rank < world)


def _printable_output() -> None:
    """Text the terminal's encoding lacks (e.g. PYTHONIOENCODING=ascii and a Greek letter) is replaced, not an
    error."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="replace")


def main(argv: list[str] | None = None) -> int:
    _printable_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.fn(args)
    except StartupInterrupted:
        print("fedcluster: interrupted during start-up; nothing was run", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (UserError, FileNotFoundError) as e:
        if not _user_facing(e):
            raise
        if _speaks():  # under torchrun every rank stops alike; rank 0 says it
            print(f"fedcluster: error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into e.g. `head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except DivergedError as e:
        if _speaks():  # under torchrun every rank stops alike; rank 0 says it
            print(f"fedcluster: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_DIVERGED
    except InterruptedRun as e:
        if _speaks():
            print(f"fedcluster: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("fedcluster: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RuntimeError as e:  # under torchrun: another rank went away
        group = sys.modules.get("fedcluster.engine.distributed.group")
        if group is None or not isinstance(e, group.RankLost):
            raise
        from fedcluster.app.launch import stop_quietly

        return stop_quietly(e)


if __name__ == "__main__":
    sys.exit(main())
