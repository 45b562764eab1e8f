"""The whole generated set of bad inputs (tests/bad_inputs/, ``python -m tests.bad_inputs``): no traceback, no silent
result, no hang."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_bad_input_set_has_no_traceback_no_silent_result_and_no_hang(tmp_path: Path) -> None:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])  # tests.bad_inputs
    env = {**os.environ, "PYTHONPATH": path, "FEDCLUSTER_CACHE": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "tests.bad_inputs"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=3 * 3600)
    counts = re.search(r"tried (\d+): clean (\d+), traceback (\d+), silent (\d+), hang (\d+), other (\d+)",
                       done.stdout)
    assert counts is not None, done.stdout[-2000:] + done.stderr[-2000:]
    tried, _, tracebacks, silent, hangs, _ = map(int, counts.groups())
    assert tried >= 700 and (tracebacks, silent, hangs) == (0, 0, 0), done.stdout[-4000:]
