"""``reproduce --time-limit MIN``: whole runs until the limit, each stored as it finishes; the run the limit cuts is
dropped, and the same command again continues from the stored runs (a paper budget built up window by window)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.reproduce import run_suite

NAME = "s4-ablation-tehc-trhc"  # three methods, one setting


def _records(out: Path) -> list[dict]:
    return json.loads((out / f"{NAME}.json").read_text())["records"]


def test_the_limit_stops_a_run_midway_and_the_next_call_continues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out, real, calls, cut = tmp_path / "reproduction", run_suite.execute, [0], [0.0]
    command = ["reproduce", NAME, "--budget", "tiny", "--seeds", "1", "--out", str(out), "--set", "threads=1"]

    def second_run_outlasts_the_limit(*args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 2:  # the limit's alarm goes off during this run
            cut[0] = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            time.sleep(30)
        return real(*args)

    monkeypatch.setattr(run_suite, "execute", second_run_outlasts_the_limit)
    assert main([*command, "--time-limit", "10"]) == 0
    assert time.monotonic() - cut[0] < 20  # not the 30 s sleep: the limit cut the run under way
    first = _records(out)
    assert len(first) == 1 and calls[0] == 2
    err = capsys.readouterr().err
    assert "limit stopped it with 1 of 3 runs" in err and "continues" in err
    assert not json.loads((out / f"{NAME}.json").read_text())["finished"]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no alarm left behind

    monkeypatch.setattr(run_suite, "execute", real)
    assert main(command) == 0  # continues: the stored run is kept, the two others run
    again = _records(out)
    assert len(again) == 3 and again[0] == first[0]
    assert json.loads((out / f"{NAME}.json").read_text())["finished"]


def test_a_bad_limit_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "-3", "nan", "inf", "-inf", "1e9"):
        assert main(["reproduce", NAME, "--budget", "tiny", "--out", str(tmp_path), f"--time-limit={bad}"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "--time-limit" in err and "minutes above 0" in err
    assert not list(tmp_path.iterdir())  # refused before anything ran
