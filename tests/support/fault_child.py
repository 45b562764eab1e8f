"""A fedcluster command that SIGKILLs itself at a chosen point (used by test_faults.py).

    python tests/support/fault_child.py PHASE N fedcluster-args...

PHASE ``row``: right after writing row N of rounds.csv; ``checkpoint``: in the middle of writing the
N-th checkpoint (temporary file written, not yet renamed); ``none``: never.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from pathlib import Path

from fedcluster.app.cli import main
from fedcluster.tracking.run_dir import RunDir


def kill_self_at(phase: str, n: int) -> None:
    if phase == "row":
        append = RunDir.append_round

        def append_then_die(self: RunDir, row: dict) -> None:
            append(self, row)
            if row["round"] == n:
                os.kill(os.getpid(), signal.SIGKILL)

        RunDir.append_round = append_then_die  # type: ignore[method-assign]
    elif phase == "checkpoint":
        replace, count = os.replace, [0]

        def die_before_rename(src: str, dst: str) -> None:
            if Path(dst).name == "checkpoint.pt":
                count[0] += 1
                if count[0] == n:
                    os.kill(os.getpid(), signal.SIGKILL)
            replace(src, dst)

        os.replace = die_before_rename  # type: ignore[assignment]


if __name__ == "__main__":
    # Ctrl-C as in a terminal, even when the tests were started in the background (where SIGINT is ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a test that waited too long asks for the stacks
    kill_self_at(sys.argv[1], int(sys.argv[2]))
    sys.exit(main(sys.argv[3:]))
