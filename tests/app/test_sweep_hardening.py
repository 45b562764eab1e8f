"""``fedcluster sweep`` trusts nothing: a planted ``sweep.json``, values that make long or odd folder names, two
spellings of one value, a refused point, SIGTERM and a huge grid each end in one true line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.app.sweep.grid import expand, parse_axes
from fedcluster.errors import ConfigError

DEEP = "[" * 100_000 + "]" * 100_000
PLANTED = {
    "deep JSON": DEEP,
    "diverged is a number": json.dumps({"diverged": 5}),
    "diverged holds a number": json.dumps({"diverged": [5]}),
    "a point's name is a number": json.dumps({"points": [{"name": 5, "setting": {}, "algorithm": "fedavg"}]}),
    "a point's name leaves the folder": json.dumps({"points": [{"name": "../x", "setting": {}, "algorithm": "a"}]}),
    "a point's setting is a list": json.dumps({"points": [{"name": "a", "setting": [1], "algorithm": "fedavg"}]}),
    "a point's algorithm is a list": json.dumps({"points": [{"name": "a", "setting": {}, "algorithm": [1]}]}),
    "keys is a number": json.dumps({"points": [{"name": "a", "setting": {}, "algorithm": "x"}], "keys": 5}),
    "not an object": "[1, 2]",
}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("case", list(PLANTED))
def test_a_planted_sweep_file_is_refused_in_one_line(case: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "sweep.json").write_text(PLANTED[case])
    (folder / "a").mkdir()  # a finished-looking point, so that compare reads the points
    assert main(["compare", str(folder)]) == 2
    assert "sweep.json" in _one_line(capsys.readouterr().err)
    assert main(["sweep", "algorithm=fedavg", "rounds=1", "num_clients=6", "--out", str(folder)]) == 2
    assert "sweep.json" in _one_line(capsys.readouterr().err)


def test_a_very_long_value_makes_a_bounded_safe_folder_name(tmp_path: Path) -> None:
    long = "0.2" + "0" * 300  # lr=0.2 written with 303 characters
    folder = "/x/" + "a" * 300
    points = expand(None, parse_axes([f"lr=0.1,{long}", f"data_dir={folder},{folder}b", "seed=0"]))
    names = [p.name for p in points]
    assert len(set(names)) == len(names) == 4  # two long values alike but for their last letter stay apart
    for name in names:
        assert len(name.encode()) <= 150 and "/" not in name and name not in (".", "..")
        (tmp_path / name).mkdir()  # the file system takes it
        (tmp_path / f"{name}.log").write_text("")


def test_two_spellings_of_one_value_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="same value"):
        parse_axes(["lr=0.1,1e-1"])
    assert main(["sweep", "lr=0.1,1e-1", "rounds=1", "--out", str(tmp_path / "s")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "0.1" in line and "1e-1" in line and not (tmp_path / "s").exists()


def test_a_refused_point_ends_the_sweep_with_a_true_summary(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "no-data"
    empty.mkdir()
    items = ["dataset=mnist,digits", f"data_dir={empty}", "model=logistic", "rounds=1", "num_clients=6",
             "--out", str(tmp_path / "s")]
    for _ in range(2):  # the rerun says the same
        assert main(["sweep", *items]) == 2
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]
        assert "refused" in last and "mnist" in last and "1 run(s) not started" in last, err
        assert "interrupted" not in err and "Traceback" not in err


def test_sigterm_stops_the_sweep_and_its_current_run(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    sweep = subprocess.Popen([sys.executable, "-m", "fedcluster", "sweep", "algorithm=fedavg,ifca", "rounds=100000",
                              "num_clients=6", "checkpoint_every=1", "--out", str(folder)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rounds = folder / "fedavg" / "rounds.csv"
    deadline = time.monotonic() + 120
    while not (rounds.is_file() and len(rounds.read_text().splitlines()) > 2) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sweep.poll() is None and rounds.is_file()
    sweep.send_signal(signal.SIGTERM)
    try:
        _, err = sweep.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        sweep.kill()
        raise
    assert sweep.returncode == 128 + signal.SIGTERM, err
    assert "interrupted" in err and "resume from their checkpoints" in err and "Traceback" not in err
    size = rounds.stat().st_size
    time.sleep(3)
    assert rounds.stat().st_size == size  # the run stopped with the sweep
    assert (folder / "fedavg" / "checkpoint.pt").is_file() and not (folder / "ifca").exists()


def test_a_grid_larger_than_the_bound_is_refused_unless_asked(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    values = ",".join(str(i) for i in range(1001))
    started = time.monotonic()
    assert main(["sweep", f"seed={values}", f"data_seed={values}", "--out", str(tmp_path / "s")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "1002001 runs" in line and "--max-runs" in line and time.monotonic() - started < 10
    assert main(["sweep", "seed=0,1,2", "--max-runs", "2", "--out", str(tmp_path / "s")]) == 2
    assert "3 runs" in _one_line(capsys.readouterr().err)
    # asked for: the size passes, and the grid's own mistake is what stops it
    assert main(["sweep", "seed=0,1,2", "num_clients=0", "--max-runs", "3", "--out", str(tmp_path / "s")]) == 2
    assert "num_clients" in _one_line(capsys.readouterr().err)
