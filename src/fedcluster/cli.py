"""The ``fedcluster`` command line: run, resume, list.

Every user mistake (unknown key or name, wrong type, bad range, missing file) ends with one line on
stderr naming what is wrong and the valid choices, and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fedcluster.errors import DivergedError, InterruptedRun, UserError

EXIT_USAGE = 2  # bad input, an unusable file or folder (including a full disk)
EXIT_DIVERGED = 3  # non-finite losses or weights: the run stopped, its last checkpoint kept
EXIT_INTERRUPTED = 130  # Ctrl-C


def _split_args(items: list[str]) -> tuple[str | None, list[str]]:
    """The optional leading CONFIG.yaml and the key=value overrides."""
    if items and "=" not in items[0]:
        return items[0], items[1:]
    return None, items


def cmd_run(args: argparse.Namespace) -> int:
    from fedcluster.config import load_raw, resolve
    from fedcluster.engine.runner import Run

    path, overrides = _split_args(args.items)
    for extra in overrides:
        if "=" not in extra:
            raise UserError(f"argument {extra!r} is not of the form key=value (only the first argument may be "
                            "a config file)")
    cfg, typed = resolve(load_raw(path, overrides))
    run = Run(cfg, typed)
    print(run.fed.summary(), file=sys.stderr)
    summary = run.execute()
    _report(summary)
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from fedcluster.engine.runner import Run
    from fedcluster.tracking.resume import plan_resume

    plan = plan_resume(Path(args.run_dir), args.overrides)
    if plan.finished:
        plan.run_dir.release()
        print(f"fedcluster: {plan.run_dir.path} has finished all {plan.done} rounds; nothing to do "
              f"(pass rounds=N with N > {plan.done} to extend it)")
        return 0
    summary = Run(plan.cfg, plan.typed, resume=True, run_dir=plan.run_dir).execute()
    _report(summary)
    return 0


def _report(summary: dict) -> None:
    final = summary["final"]
    print(f"done: {summary['rounds']} rounds in {summary['wall_seconds']:.1f}s; final val_acc "
          f"{final.get('val_acc', float('nan')):.4f}, test_acc {final.get('test_acc', float('nan')):.4f}, "
          f"ari {final.get('ari', 0):.3f}, clusters {final.get('num_clusters')}; results in {summary['run_dir']}")


def cmd_list(args: argparse.Namespace) -> int:
    from fedcluster.registry import ALGORITHMS, DATASETS, MODELS, SCENARIOS

    for title, reg in (("algorithms", ALGORITHMS), ("datasets", DATASETS), ("scenarios", SCENARIOS),
                       ("models", MODELS)):
        if args.kind and args.kind != title:
            continue
        print(f"{title}:")
        width = max(len(e.name) for e in reg)
        for e in reg:
            print(f"  {e.name:<{width}}  {e.description}")
    return 0


def cmd_scenario(args: argparse.Namespace) -> int:
    from fedcluster.data.inspect import inspect_scenario

    return inspect_scenario(args.scenario, args.overrides, args.out)


def cmd_report(args: argparse.Namespace) -> int:
    from fedcluster.tracking.report import report_run

    return report_run(Path(args.run_dir))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fedcluster", description="Clustered federated learning.")
    sub = p.add_subparsers(dest="command")
    r = sub.add_parser("run", help="run an experiment: fedcluster run [CONFIG.yaml] [key=value ...]")
    r.add_argument("items", nargs="*", metavar="CONFIG.yaml | key=value")
    r.set_defaults(fn=cmd_run)
    rs = sub.add_parser("resume", help="continue an interrupted run from its last checkpoint")
    rs.add_argument("run_dir")
    rs.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. rounds=200 to extend a run")
    rs.set_defaults(fn=cmd_resume)
    sc = sub.add_parser("scenario", help="build a federation, print its summary and draw it")
    sc.add_argument("scenario")
    sc.add_argument("overrides", nargs="*", metavar="key=value", help="dataset=..., scenario.<name>=...")
    sc.add_argument("--out", default=None, help="picture path (default: SCENARIO-DATASET.png)")
    sc.set_defaults(fn=cmd_scenario)
    rp = sub.add_parser("report", help="draw a finished run's plots (cluster-vs-concept/class/style heatmaps)")
    rp.add_argument("run_dir")
    rp.set_defaults(fn=cmd_report)
    ls = sub.add_parser("list", help="list registered algorithms, datasets, scenarios and models")
    ls.add_argument("kind", nargs="?", choices=["algorithms", "datasets", "scenarios", "models"])
    ls.set_defaults(fn=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    import fedcluster.builtin  # noqa: F401
    from fedcluster.data.sources.base import DatasetNotFoundError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.fn(args)
    except (UserError, DatasetNotFoundError) as e:
        print(f"fedcluster: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into e.g. `head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except DivergedError as e:
        print(f"fedcluster: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_DIVERGED
    except InterruptedRun as e:
        print(f"fedcluster: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("fedcluster: interrupted before the run started; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
