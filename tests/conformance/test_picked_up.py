"""A method registered outside the package (a plugin module imported before the tests are collected) is checked by
the conformance suite with no list edited anywhere: its checks pass, and the same method reporting half its bytes
fails the bytes check alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = '''
"""Two toy methods for the conformance suite: FedAvg under another name, and one that reports half its bytes."""
from fedcluster.algorithms.fedavg import FedAvg, FedAvgParams
from fedcluster.catalog.registry import ALGORITHMS


@ALGORITHMS.register("toy-avg", "FedAvg under another name (a plugin)", FedAvgParams)
class ToyAvg(FedAvg):
    pass


@ALGORITHMS.register("toy-half-bytes", "FedAvg that reports half the bytes it sends (a plugin)", FedAvgParams)
class ToyHalfBytes(FedAvg):
    def run_round(self, round_, clients):
        res = super().run_round(round_, clients)
        res.bytes_up //= 2
        return res
'''


def test_a_method_registered_by_a_plugin_is_checked_without_editing_a_list(tmp_path: Path) -> None:
    (tmp_path / "toy_plugin.py").write_text(PLUGIN)
    path = os.pathsep.join([str(tmp_path), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "toy_plugin", "-p", "no:cacheprovider", "-rA",
                           f"--basetemp={tmp_path / 'base'}", "-k", "toy", "tests/conformance/test_every_method.py"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
                          timeout=600)
    outcomes = {test: outcome for outcome, test in re.findall(r"^(PASSED|FAILED) \S+::(\S+\])", done.stdout, re.M)}
    checks = {test.split("[")[0] for test in outcomes}
    assert len(checks) >= 5, done.stdout[-3000:]
    assert {t for t, o in outcomes.items() if t.endswith("[toy-avg]") and o == "PASSED"} == {
        f"{c}[toy-avg]" for c in checks}, done.stdout[-3000:]
    assert [t for t, o in outcomes.items() if o == "FAILED"] == ["test_bytes_are_what_the_round_sent[toy-half-bytes]"]
    assert "bytes_up=" in done.stdout and done.returncode == 1
