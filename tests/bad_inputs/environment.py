"""Environment variables, ranks and the cache key: what the process finds around it."""


import io
import json
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from tests.bad_inputs.core import RUN, Case, _in_folder, _mnist_folder, _with_env, copy_run


def environment_cases() -> list[Case]:
    run = lambda d: [*RUN, f"out={d / 'r'}"]  # noqa: E731
    two = lambda d: [*RUN, "ranks=2", f"out={d / 'r'}"]  # noqa: E731
    cases = [Case("environment", f"FEDCLUSTER_COLLECTIVE_TIMEOUT={v} with ranks=2",
                  call=_with_env({"FEDCLUSTER_COLLECTIVE_TIMEOUT": v}, two), expect="either",
                  check=lambda d, out: False) for v in ("abc", "nan", "0", "-1", "inf", "1e400")]
    cases += [
        Case("environment", "FEDCLUSTER_COLLECTIVE_TIMEOUT=abc, one process",
             call=_with_env({"FEDCLUSTER_COLLECTIVE_TIMEOUT": "abc"}, run), expect="ok",
             check=lambda d, out: (d / "r" / "summary.json").exists()),
        Case("environment", "RANK=1 WORLD_SIZE=4 left without MASTER_ADDR",
             call=_with_env({"RANK": "1", "WORLD_SIZE": "4"}, run), expect="ok",
             check=lambda d, out: "MASTER_ADDR is not" in out and (d / "r" / "summary.json").exists()),
        Case("environment", "WORLD_SIZE=abc", call=_with_env({"WORLD_SIZE": "abc"}, run), expect="either",
             check=lambda d, out: False),
        Case("environment", "RANK=abc", call=_with_env({"RANK": "abc", "WORLD_SIZE": "2"}, run), expect="either",
             check=lambda d, out: False),
        Case("environment", "RANK=5 of WORLD_SIZE=2 with MASTER_ADDR",
             call=_with_env({"RANK": "5", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost"}, run), expect="either",
             check=lambda d, out: False),
    ]
    return cases


def ranks_cases() -> list[Case]:
    return [
        Case("ranks", "ranks=64 for 4 clients", lambda d: [*RUN, "ranks=64", f"out={d / 'r'}"]),
        Case("ranks", "ranks=1000000", lambda d: [*RUN, "num_clients=2000000", "ranks=1000000", f"out={d / 'r'}"]),
        Case("ranks", "ranks beyond the cores", lambda d: [*RUN, "num_clients=10000", "ranks=5000",
                                                           f"out={d / 'r'}"]),
        Case("ranks", "resume with ranks=64", lambda d: ["resume", str(copy_run(d.parent, d)), "rounds=3",
                                                         "ranks=64", "progress=false"]),
        Case("ranks", "flower simulate ranks=2",
             lambda d: ["flower", "simulate", *RUN[1:], "ranks=2", f"out={d / 'r'}"]),
    ]


def _samples(d: Path) -> int:
    """Training plus validation samples of the run's federation (its summary's first line)."""
    import re

    found = re.search(r"(\d+) train / (\d+) val", json.loads((d / "r" / "summary.json").read_text())["federation"])
    return int(found[1]) + int(found[2]) if found else -1


def cache_key_cases() -> list[Case]:
    mnist = lambda d: ["run", "dataset=mnist", "data_dir=data", "scenario=iid", "num_clients=2", "rounds=1",  # noqa: E731
                       "progress=false", "model=logistic", f"out={d / 'r'}"]

    def two_folders(d: Path) -> None:
        _mnist_folder(d / "a" / "data", 40)
        _mnist_folder(d / "b" / "data", 30, seed=1)
        with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
            assert _in_folder(lambda d: d / "a", lambda d: [*mnist(d)[:-1], f"out={d / 'first'}"])(d) == 0

    def changed(d: Path) -> None:
        _mnist_folder(d / "data", 40)
        with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
            assert _in_folder(lambda d: d, lambda d: [*mnist(d)[:-1], f"out={d / 'first'}"])(d) == 0
        (d / "data" / "t10k-labels-idx1-ubyte").unlink()

    return [
        Case("cache key", "the same relative data_dir in another folder", call=_in_folder(lambda d: d / "b", mnist),
             setup=two_folders, expect="ok",
             check=lambda d, out: (d / "r" / "summary.json").exists() and _samples(d) == 30),
        Case("cache key", "a data file removed after the first run", call=_in_folder(lambda d: d, mnist),
             setup=changed),
    ]


def _serve_under_a_long_tmpdir(d: Path) -> int:

    folder = d / ("t" * 100) / ("u" * 100)
    folder.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = None  # read TMPDIR again, now and after
    try:
        return _with_env({"TMPDIR": str(folder)}, lambda d: ["flower", "serve", "--superlink", "no-port",
                                                             "--insecure", *RUN[1:], f"out={d / 'r'}"])(d)
    finally:
        tempfile.tempdir = None


def round_four_environment_cases() -> list[Case]:
    run = lambda d: [*RUN, f"out={d / 'r'}"]  # noqa: E731
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    stale = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "FEDCLUSTER_COLLECTIVE_TIMEOUT": "3"}
    return [
        Case("environment", "a stale torchrun environment: no rank 1", call=_with_env({**stale, "MASTER_PORT": port},
                                                                                      run)),
        Case("environment", "a stale torchrun environment: no MASTER_PORT", call=_with_env(stale, run)),
        Case("environment", "FEDCLUSTER_CACHE=''",
             call=lambda d: _with_env({"FEDCLUSTER_CACHE": "", "HOME": str(d / "home")}, run)(d)),
        Case("environment", "FEDCLUSTER_CACHE=' '",
             call=lambda d: _with_env({"FEDCLUSTER_CACHE": " ", "HOME": str(d / "home")}, run)(d)),
        Case("environment", "FedGroup num_groups=100 of 4 clients",
             lambda d: [*RUN, "algorithm=fedgroup", "algorithm.num_groups=100", f"out={d / 'r'}"]),
        Case("environment", "MLflow at a closed port: the error before any summary",
             lambda d: [*RUN, "tracking=mlflow", f"tracking_uri=http://127.0.0.1:{port}/", f"out={d / 'r'}"]),
        Case("environment", "MLFLOW_TRACKING_URI honoured", expect="ok",
             call=lambda d: _with_env({"MLFLOW_TRACKING_URI": f"sqlite:///{d / 'm.db'}"},
                                      lambda d: [*run(d), "tracking=mlflow"])(d),
             check=lambda d, out: "MLFLOW_TRACKING_URI" in out and (d / "m.db").is_file()),
        Case("environment", "flower serve with a bad address under a 200-byte TMPDIR",
             call=_serve_under_a_long_tmpdir),
        Case("environment", "FL+HC cluster_round past the last round", expect="ok",
             argv=lambda d: [*RUN, "algorithm=flhc", "algorithm.cluster_round=5", f"out={d / 'r'}"],
             check=lambda d, out: "past the last round" in out),
    ]
