"""A rank of a 2-process test job: runs ``fedcluster run`` once per spec in one process group.

``python distributed_child.py OUT_ROOT SPECS`` (SPECS: JSON ``{"label": ["key=value", ...], ...}``) with
torch.distributed's env (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) set by the test: one interpreter start for
all runs, each into ``OUT_ROOT/label``. Exits with the first non-zero status of the CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fedcluster.app.cli import main

if __name__ == "__main__":
    root, specs = Path(sys.argv[1]), json.loads(sys.argv[2])
    for label, args in specs.items():
        code = main(["run", *args, f"out={root / label}"])
        if code:
            sys.exit(code)
    from fedcluster.engine.distributed.group import leave_group

    leave_group()
