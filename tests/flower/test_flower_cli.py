"""``fedcluster flower``: bad input ends with one line and exit status 2; the generated Flower app; the
simulation (Ray) gives the in-process engine's run (slow)."""

from __future__ import annotations

import csv
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedcluster.app.cli import main

pytest.importorskip("flwr")

from fedcluster.flower.commands import split_options, write_app, write_connection  # noqa: E402
from fedcluster.flower.server import FlowerOptions, exchange  # noqa: E402


@pytest.mark.parametrize("argv, needle", [
    (["flower", "serve", "rounds=2"], "--insecure"),
    (["flower", "serve", "--insecure", "flower.retries=3"], "flower.retries"),
    (["flower", "serve", "--insecure", "flower.min_clients=0"], "min_clients"),
    (["flower", "serve", "--insecure", "flower.timeout=-1"], "timeout"),
    (["flower", "serve", "--insecure", "flower.timeout=soon"], "flower.timeout"),
    (["flower", "simulate", "algorithm=nope"], "nope"),
    (["flower", "serve", "--root-certificates", "/nonexistent/ca.pem"], "ca.pem"),
    (["flower", "node", "--insecure", "--partition-id", "-1"], "partition-id"),
    (["flower", "node", "--insecure", "--partition-id", str(10**15)], "partition-id must be >= 0 and below"),
    (["flower", "simulate", "--cpus-per-client", "nan", "rounds=1", "num_clients=4"], "--cpus-per-client above 0"),
    (["flower", "simulate", "--cpus-per-client", "inf", "rounds=1", "num_clients=4"], "--cpus-per-client above 0"),
    (["flower", "simulate", "--gpu-fraction", "nan", "rounds=1", "num_clients=4"], "--gpu-fraction must be in"),
    (["flower", "node", "--insecure", "--partition-id", "0", "--auth-private-key", "/nonexistent"], "private-key"),
])
def test_bad_input_is_one_line_and_status_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a refused simulate with the default out= may leave runs/ behind
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_flower_keys_are_split_from_the_run_keys() -> None:
    path, overrides, options = split_options(["exp.yaml", "rounds=3", "flower.min_clients=4", "flower.timeout=30"])
    assert path == "exp.yaml" and overrides == ["rounds=3"]
    assert options == FlowerOptions(min_clients=4, timeout=30.0)


def test_generated_app_and_connection(tmp_path: Path) -> None:
    """``flwr run`` reads these: the components, the run config and the SuperLink connection."""
    write_app(tmp_path / "app", "algorithm: ifca\nrounds: 2\n", FlowerOptions(min_clients=2, timeout=9.0))
    doc = tomllib.loads((tmp_path / "app" / "pyproject.toml").read_text())
    app = doc["tool"]["flwr"]["app"]
    assert app["components"] == {"serverapp": "fedcluster.flower.apps:server_app",
                                 "clientapp": "fedcluster.flower.apps:client_app"}
    assert app["config"] == {"config": "algorithm: ifca\nrounds: 2\n", "min-clients": 2, "timeout": 9.0}
    write_connection(tmp_path / "home", "10.0.0.1:8000", False, str(tmp_path / "ca.pem"))
    conn = tomllib.loads((tmp_path / "home" / "config.toml").read_text())["superlink"]
    assert conn["default"] == "fedcluster"
    assert conn["fedcluster"] == {"address": "10.0.0.1:8000", "root-certificates": str(tmp_path / "ca.pem")}


class FakeGrid:
    """Replies to message i become available ``delays[i]`` seconds after the push; counts the pulls."""

    def __init__(self, delays: list[float], pull_interval: float | None = None) -> None:
        self.delays, self.pulls, self.t0 = delays, 0, 0.0
        if pull_interval is not None:
            self.pull_interval = pull_interval

    def push_messages(self, messages: list[object]) -> list[str]:
        self.t0 = time.monotonic()
        return [str(i) for i, _ in enumerate(messages)]

    def pull_messages(self, ids: set[str]) -> list[SimpleNamespace]:
        self.pulls += 1
        now = time.monotonic() - self.t0
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=i)) for i in sorted(ids)
                if self.delays[int(i)] <= now]


def test_exchange_polls_soon_then_less_often_and_stops_at_the_timeout() -> None:
    grid = FakeGrid([0.0, 0.3, 0.6])
    t0 = time.monotonic()
    replies = exchange(grid, ["a", "b", "c"], timeout=10)  # type: ignore[arg-type]
    took = time.monotonic() - t0
    assert sorted(r.metadata.reply_to_message_id for r in replies) == ["0", "1", "2"]
    assert 0.6 <= took < 2.0 and grid.pulls <= 12  # not Flower's 3 s, and no busy loop
    slow = FakeGrid([0.0, 30.0])
    t0 = time.monotonic()
    replies = exchange(slow, ["a", "b"], timeout=0.4)  # type: ignore[arg-type]
    assert [r.metadata.reply_to_message_id for r in replies] == ["0"] and time.monotonic() - t0 < 1.5
    capped = FakeGrid([0.5], pull_interval=0.02)  # the simulation's grid: never poll slower than it does
    exchange(capped, ["a"], timeout=10)  # type: ignore[arg-type]
    assert capped.pulls >= 12


@pytest.mark.slow
def test_simulation_equals_in_process(tmp_path: Path) -> None:
    base = ["algorithm=ifca", "dataset=digits", "num_clients=6", "rounds=3", "model=mlp", "model.hidden=[16]",
            "progress=false"]
    assert main(["flower", "simulate", *base, f"out={tmp_path / 'sim'}"]) == 0
    assert main(["run", *base, f"out={tmp_path / 'local'}"]) == 0

    def read(run: str, name: str) -> list[dict[str, str]]:
        with (tmp_path / run / name).open() as f:
            return list(csv.DictReader(f))

    assert [r["cluster"] for r in read("sim", "clients.csv")] == [r["cluster"] for r in read("local", "clients.csv")]
    for a, b in zip(read("sim", "rounds.csv"), read("local", "rounds.csv"), strict=True):
        for key in ("val_acc", "test_acc", "ari", "val_loss", "test_loss"):
            assert float(a[key]) == pytest.approx(float(b[key]), abs=1e-5), key


@pytest.mark.parametrize("command", ["simulate", "serve"])
def test_help_names_the_flower_keys_with_their_defaults(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["flower", command, "--help"])
    out = capsys.readouterr().out
    defaults = FlowerOptions()
    assert "flower.min_clients=N" in out and f"(default {defaults.min_clients})" in out
    assert "flower.timeout=SECONDS" in out and f"(default {defaults.timeout:g})" in out


def test_done_line_has_test_acc_as_in_process_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from fedcluster.flower.commands import _print_done

    _print_done({"rounds": 3, "final": {"val_acc": 0.5, "test_acc": 0.25, "ari": 1.0, "num_clusters": 3}}, "/r")
    out = capsys.readouterr().out
    assert "val_acc 0.5000" in out and "test_acc 0.2500" in out


def test_simulation_drops_only_flowers_run_simulation_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from flwr.supercore.logger import warn_deprecated_feature

    from fedcluster.flower.simulation import quiet_simulation

    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep()
    logging.getLogger("flwr").addHandler(keep)
    monkeypatch.delenv("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", raising=False)
    try:
        with quiet_simulation():
            warn_deprecated_feature("The `run_simulation` function is deprecated and will be removed")
            warn_deprecated_feature("Something else")
            assert __import__("os").environ["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] == "0"
        warn_deprecated_feature("The `run_simulation` function is deprecated and will be removed")
    finally:
        logging.getLogger("flwr").removeHandler(keep)
    assert ["run_simulation" in m for m in seen] == [False, True]  # filtered inside only; others pass
