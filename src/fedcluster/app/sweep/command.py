"""``fedcluster sweep [CONFIG] key=v1,v2 ... [--workers N] [--out DIR]`` and ``fedcluster compare SWEEP_DIR``.

The sweep's folder (default ``runs/sweep-CONFIG``, a fixed name so that running the same command again continues
the sweep) holds one run directory per point, ``sweep.json`` (the grid), ``logs/`` and, at the end,
``sweep.csv``, ``sweep.md`` and ``sweep.png`` (:mod:`fedcluster.app.sweep.table`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fedcluster.app.sweep.execute import LOGS, STATE_FILE, Outcome, Runner, SweepState, check_same_settings, finished
from fedcluster.app.sweep.grid import Point, expand, grid_size, parse_axes
from fedcluster.config.validation import usable_cpus
from fedcluster.errors import UserError
from fedcluster.storage.atomic import writing
from fedcluster.storage.paths import output_path
from fedcluster.tracking.compare import load_run

EXIT_FAILED, EXIT_USAGE = 1, 2
MAX_RUNS = 1000  # the default of --max-runs


def default_folder(config: str | None) -> Path:
    return Path("runs") / f"sweep-{Path(config).stem if config else 'defaults'}"


def run_sweep(args: argparse.Namespace) -> int:
    config, items = (args.items[0], args.items[1:]) if "=" not in args.items[0] else (None, args.items)
    max_runs = getattr(args, "max_runs", MAX_RUNS)
    if args.workers < 1:
        raise UserError(f"--workers must be >= 1, got {args.workers}")
    if max_runs < 1:
        raise UserError(f"--max-runs must be >= 1, got {max_runs}")
    axes = parse_axes(items)
    if grid_size(axes) > max_runs:
        raise UserError(f"this grid has {grid_size(axes)} runs, more than --max-runs {max_runs}; give fewer "
                        f"values, or pass --max-runs {grid_size(axes)} to run them all")
    points = expand(config, axes)
    folder = output_path(args.out or default_folder(config), f"--out {args.out or default_folder(config)}",
                         folder=True)
    for p in points:
        check_same_settings(p, folder / p.name)
    with writing(folder, "choose another --out"):
        folder.mkdir(parents=True, exist_ok=True)
    state = SweepState.load(folder)
    state.data.update(config=str(Path(config).resolve()) if config else None, items=items,
                      keys=[a.key for a in axes if len(a.values) > 1 and a.key != "seed"],
                      points=[{"name": p.name, "setting": p.setting, "seed": p.seed, "algorithm": p.algorithm}
                              for p in points])
    state.save()
    threads = None
    if args.workers > 1 and not any(i.split("=", 1)[0].strip() == "threads" for i in items):
        threads = max(1, usable_cpus() // args.workers)  # the runs share the cores instead of each taking all
    outcomes = Runner(folder, config, state, args.workers, threads).run_all(points)
    report(folder, state, points, None)
    return conclude(outcomes, folder)


def conclude(outcomes: list[Outcome], folder: Path) -> int:
    """The sweep's last line (on stderr) and exit status: refused, interrupted, failed or done."""
    refused = [o for o in outcomes if o.status == "failed" and o.rc == EXIT_USAGE]
    interrupted = [o for o in outcomes if o.status == "interrupted"]
    failed = [o for o in outcomes if o.status == "failed"]
    if refused:
        unstarted = sum(o.status == "not started" for o in outcomes)
        print(f"sweep: stopped: the run {refused[0].name} was refused: {refused[0].note}"
              + (f"; {unstarted} run(s) not started" if unstarted else "")
              + "; fix that, then run the same command again to continue", file=sys.stderr)
        return EXIT_USAGE
    if interrupted:
        stopped = [o for o in interrupted if o.name]
        kept = sum(o.note.startswith("resumes") for o in stopped)
        parts = [f"{kept} stopped run(s) resume from their checkpoints" if kept else "",
                 f"{len(stopped) - kept} start again (no checkpoint yet)" if len(stopped) > kept else ""]
        how = "; ".join(p for p in parts if p)
        print("sweep: interrupted; run the same command again to continue (finished runs are kept"
              + (f"; {how}" if how else "") + f"; folder {folder})", file=sys.stderr)
        return max(o.rc for o in interrupted)
    if failed:
        print(f"sweep: {len(failed)} run(s) failed, e.g. {failed[0].name}: {failed[0].note}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def report(folder: Path, state: SweepState, points: list[Point] | None, out: Path | None) -> int:
    """Print the sweep's table and write sweep.csv, sweep.md and sweep.png into ``out`` (default: the sweep)."""
    from fedcluster.app.sweep.table import Setting, mark_best, markdown, plot, write_csv

    entries = [{"name": p.name, "setting": p.setting, "algorithm": p.algorithm} for p in points] if points else \
        state.data.get("points", [])
    settings: dict[str, Setting] = {}
    diverged = state.diverged()
    for e in entries:
        key = repr(sorted(e["setting"].items()))
        s = settings.setdefault(key, Setting(dict(e["setting"]), e["algorithm"], 0))
        s.planned += 1
        run_dir = folder / e["name"]
        if finished(run_dir):
            s.runs.append(load_run(run_dir))
        elif e["name"] in diverged:
            s.diverged += 1
    rows = list(settings.values())
    mark_best(rows)
    keys = state.data.get("keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        keys = list(dict.fromkeys(k for s in rows for k in s.values))
    table = markdown(rows, keys)
    print(table)
    out = out or folder
    with writing(out, "choose another --out"):
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.md").write_text(table + "\n")
        write_csv(rows, keys, out / "sweep.csv")
        plot(rows, keys, out / "sweep.png", f"{folder.name}: mean ± sd over seeds")
    done = sum(len(s.runs) for s in rows)
    print(f"{done} of {len(entries)} runs finished; wrote {out / 'sweep.csv'}, {out / 'sweep.md'} and "
          f"{out / 'sweep.png'}", file=sys.stderr)
    return 0


def is_sweep_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / STATE_FILE).is_file()


def compare_sweep(path: str | os.PathLike[str], out: str | None) -> int:
    """``fedcluster compare SWEEP_DIR``: the sweep's table and picture again, from what its runs hold now."""
    folder = Path(path)
    state = SweepState.load(folder)
    if not state.data.get("points"):
        raise UserError(f"{folder / STATE_FILE} lists no sweep points; it is damaged: run the sweep's command again")
    if not any(finished(folder / e["name"]) for e in state.data["points"]):
        raise UserError(f"{folder} holds no finished run yet; run the sweep (see {folder / LOGS})")
    target = output_path(out, f"--out {out}", folder=True) if out else None
    return report(folder, state, None, target)
