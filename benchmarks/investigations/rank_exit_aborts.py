"""Count the two-rank launches that finish every round yet do not end cleanly (e.g. gloo aborting a rank at exit).

Each launch is a fresh ``fedcluster run ... ranks=2`` (half of them then a ``resume`` adding one round, the case
that once ended in "rank 1 was killed by SIGABRT" after its last round) in its own interpreter. A launch is
clean when it exits 0, its last stderr line is not torch's, and it mentions no signal. Prints one line per
unclean launch and the counts.

Usage: python benchmarks/investigations/rank_exit_aborts.py [--launches 200] [--out DIR] [key=value ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = ["algorithm=ifca", "num_clients=4", "rounds=1", "progress=false", "ranks=2", "threads=1"]


def launch(args: list[str]) -> tuple[int, str]:
    res = subprocess.run([sys.executable, "-m", "fedcluster", *args], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return res.returncode, res.stderr


def unclean(rc: int, err: str) -> str | None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc != 0:
        return f"exit {rc}: {lines[-1] if lines else ''}"
    if "SIG" in err or "Traceback" in err:
        return "exit 0 with: " + next(ln for ln in lines if "SIG" in ln or "Traceback" in ln)
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launches", type=int, default=200)
    p.add_argument("--out", default=None, help="folder for the runs (default: a temporary one)")
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    root = Path(a.out or tempfile.mkdtemp(prefix="rank-exit-"))
    bad = 0
    for i in range(a.launches):
        out = root / f"r{i}"
        if i % 2 == 0 or not (root / f"r{i - 1}" / "summary.json").is_file():
            rc, err = launch(["run", *RUN, *a.overrides, f"out={out}"])
        else:
            rc, err = launch(["resume", str(root / f"r{i - 1}"), "rounds=2", "progress=false"])
        if (why := unclean(rc, err)) is not None:
            bad += 1
            print(f"launch {i + 1}: {why}", flush=True)
    print(f"{bad} unclean of {a.launches} two-rank launches", flush=True)


if __name__ == "__main__":
    main()
