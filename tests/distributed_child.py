"""A rank of a 2-process test job: runs ``fedcluster run`` once per method in one process group.

``python distributed_child.py OUT_ROOT METHODS KEY=VALUE...`` (METHODS: ``name[+key=value...],...``) with
torch.distributed's env (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) set by the test: one interpreter start for
all methods. Exits with the first non-zero status of the CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fedcluster.cli import main

if __name__ == "__main__":
    root, methods, extra = Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
    for spec in methods:
        method, *own = spec.split("+")
        code = main(["run", f"algorithm={method}", f"out={root / method}", *extra, *own])
        if code:
            sys.exit(code)
