"""benchmarks/ call the library: diverse_shift.py's mean ± sd over seeds is ``fedcluster compare``'s sample sd."""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def diverse_shift(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """benchmarks/fidelity/diverse_shift.py as a module (its _common pins BLAS threads: restored after the test)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, os.environ.get(var, "1"))
    monkeypatch.syspath_prepend(str(BENCHMARKS / "fidelity"))
    import diverse_shift

    return diverse_shift


def write_run(path: Path, algorithm: str, seed: int, local: float, glob: float, ari: float) -> str:
    """A finished run directory whose best-validation round has these accuracies (fractions) and ARI."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump({"algorithm": algorithm, "seed": seed, "out": str(path),
                                                      "algorithm_params": {}}))
    with (path / "rounds.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerows([["round", "val_acc", "test_acc", "ari", "num_clusters", "bytes_up", "bytes_down", "seconds"],
                      [1, local, glob, ari, 1, 0, 0, 0.1]])
    at = {"val_acc": local, "test_acc": glob, "ari": ari}
    (path / "summary.json").write_text(json.dumps({"final": at, "at_best_val": at,
                                                   "best": {"val_acc": {"value": local, "round": 1}}}))
    return str(path)


def test_table_is_mean_and_sample_sd_over_seeds(diverse_shift: ModuleType, tmp_path: Path) -> None:
    local = [0.5, 0.7, 0.9]  # mean 70 %, sample sd 20 % (population sd 16.3 %)
    dirs = [write_run(tmp_path / f"fedavg-{s}", "fedavg", s, v, v / 2, 0.1 * s) for s, v in enumerate(local)]
    dirs.append(write_run(tmp_path / "ifca-0", "ifca", 0, 0.8, 0.6, 0.9))
    table = diverse_shift.table(dirs, ["fedavg", "ifca"])
    assert table["fedavg"]["local"] == pytest.approx((70.0, 20.0))
    assert table["fedavg"]["global"] == pytest.approx((35.0, 10.0))
    assert table["fedavg"]["ari"] == pytest.approx((0.1, 0.1))
    mean, sd = table["ifca"]["local"]
    assert mean == pytest.approx(80.0) and math.isnan(sd)  # one run: no sd
    assert diverse_shift.common.pm(70.0, 20.0) == "70.00 ± 20.00" and diverse_shift.common.pm(mean, sd) == "80.00"


@pytest.mark.slow  # about 5 s of CPU: two federations and four one-round runs
def test_diverse_shift_end_to_end_prints_the_sample_sd(diverse_shift: ModuleType, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    monkeypatch.setattr(sys, "argv", [
        "diverse_shift.py", "--clients", "6", "--rounds", "1", "--methods", "fedavg,ifca", "--seeds", "0,1",
        "--fraction", "0.5", "--test-size", "10", "--model", "mlp", "--set", "dataset=digits",
        "--set", "model.hidden=[8]", "--set", "threads=1", "--out", str(out)])
    diverse_shift.main()
    printed = capsys.readouterr().out
    per_seed = json.loads((out / "table.json").read_text())
    assert sorted(per_seed) == ["0", "1"]
    rows = {line.split()[0]: line for line in printed.splitlines() if line.startswith(("fedavg ", "ifca "))}
    for method in ("fedavg", "ifca"):
        values = [per_seed[s][method]["local"] for s in ("0", "1")]
        assert values[0] != pytest.approx(values[1])  # two different seeds, so sample and population sd differ
        mean, sd = statistics.mean(values), statistics.stdev(values)  # sample sd (ddof 1)
        assert f"{mean:.2f} ± {sd:.2f}" in rows[method]
        assert f"± {statistics.pstdev(values):.2f}" not in rows[method]
        assert per_seed["0"][method]["run_dir"] == str(out / "seed0" / method)
    assert "| algorithm | runs |" in printed  # fedcluster compare's table of the same run directories
    assert (out / "compare" / "comparison.csv").is_file()
