"""The node's warm worker (``fedcluster flower node``): a ClientApp process forwards its message over the
worker's socket and gets the in-process answer; the ClientApp module stays free of PyTorch; frames are
safe (JSON + safetensors)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from fedcluster.flower import node_work  # noqa: E402
from fedcluster.flower.node import ask_worker  # noqa: E402
from fedcluster.flower.wire import recv_frame, send_frame  # noqa: E402
from fedcluster.flower.worker import warm_worker  # noqa: E402

CONFIG = ("dataset: digits\nscenario: concept-swap\nnum_clients: 3\nseed: 3\nalgorithm: fedavg\nmodel: logistic\n"
          "rounds: 1\nprogress: false\nthreads: 1\n")


def test_the_clientapp_module_does_not_import_torch() -> None:
    """What a ``flwr-clientapp`` process loads for every message (the warm worker holds PyTorch)."""
    code = "import sys, fedcluster.flower.apps; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "PYTHONPATH": src}).stdout
    assert out.strip() == "[]"


def test_frames_round_trip_arrays_and_header() -> None:
    a, b = socket.socketpair()
    with a, b:
        arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.array(4, dtype=np.int64),
                  "mask": np.array([True, False]), "empty": np.zeros((0, 2), dtype=np.float64)}
        send_frame(a, {"op": "work", "lr": 0.1, "flag": True}, arrays)
        header, got = recv_frame(b)
    assert header == {"op": "work", "lr": 0.1, "flag": True}
    assert got.keys() == arrays.keys()
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and np.array_equal(got[k], v)


def test_the_worker_answers_as_the_clientapp_would() -> None:
    with warm_worker() as worker:
        worker.start()
        path = worker.path
        assert oct(os.stat(Path(path).parent).st_mode & 0o777) == oct(0o700)  # this user's only
        reply, _ = ask_worker(path, {"op": "hello", "partition": 2, "config": CONFIG})
        assert reply["hello"] == node_work.hello(2, CONFIG)
        with pytest.raises(RuntimeError, match="outside 0..2"):
            ask_worker(path, {"op": "hello", "partition": 7, "config": CONFIG})
        with pytest.raises(RuntimeError, match="reached the node of partition 1"):
            ask_worker(path, {"op": "work", "partition": 1, "config": CONFIG, "task": {"kind": "train", "client": 0}})
    assert not Path(path).exists()
