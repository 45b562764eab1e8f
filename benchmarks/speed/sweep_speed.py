"""Wall-clock seconds of one ``fedcluster sweep`` under two source trees, interleaved, and whether their runs
computed the same numbers (every run's rounds.csv without its time columns).

    python benchmarks/speed/sweep_speed.py --old OLD_SRC --new NEW_SRC [--repeats 3] [-- SWEEP ARGUMENTS]

Each repeat runs the sweep into a fresh folder with ``PYTHONPATH=OLD_SRC``, then with ``PYTHONPATH=NEW_SRC`` (or the
other way round on odd repeats); the medians and their ratio are printed. The default grid is a part of the
sweeps guide's 72-run demo sweep (``configs/demo.yaml algorithm=ifca,fedrc algorithm.num_clusters=2,3,4,5
lr=0.01,0.03,0.1 seed=0,1,2``): pass the whole grid after ``--`` to time all of it.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = ["configs/demo.yaml", "algorithm=ifca,fedrc", "algorithm.num_clusters=2,3,4", "lr=0.03", "seed=0,1"]
TIME_COLUMNS = ("seconds", "time")


def numbers(folder: Path) -> dict[str, list[dict[str, str]]]:
    out = {}
    for path in sorted(folder.glob("*/rounds.csv")):
        with path.open() as f:
            out[path.parent.name] = [{k: v for k, v in row.items() if not any(t in k for t in TIME_COLUMNS)}
                                     for row in csv.DictReader(f)]
    return out


def sweep(src: str, args: list[str], out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fedcluster", "sweep", *args, "--out", str(out)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="the source folder (src/) of the per-process sweep")
    p.add_argument("--new", required=True, help="the source folder (src/) of the sweep to compare")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("grid", nargs="*", help="the sweep's arguments (default: %(default)s)", default=DEFAULT)
    a = p.parse_args()
    times: dict[str, list[float]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for label in order:
                out = Path(tmp) / f"{label}-{r}"
                seconds = sweep(a.old if label == "old" else a.new, a.grid, out)
                times[label].append(seconds)
                print(f"repeat {r + 1} {label}: {seconds:.1f} s", flush=True)
            same = numbers(Path(tmp) / f"old-{r}") == numbers(Path(tmp) / f"new-{r}")
            print(f"repeat {r + 1}: {len(numbers(Path(tmp) / f'new-{r}'))} runs, the same rounds.csv numbers: {same}",
                  flush=True)
            if not same:
                return 1
            for label in order:
                shutil.rmtree(Path(tmp) / f"{label}-{r}")
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    print(f"median: old {old:.1f} s, new {new:.1f} s: {old / new:.1f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
