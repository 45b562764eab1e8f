"""A node's warm worker: ``fedcluster flower node`` serves its partition's work on a Unix socket from a
long-lived thread, so the ``flwr-clientapp`` process the SuperNode starts for every message forwards the
message instead of importing PyTorch and rebuilding the federation each time (Flower 1.41 has no
long-running ClientApp for a SuperNode's local processes). The socket lives in a private folder (mode
0700) of this user; frames are JSON and safetensors (:mod:`fedcluster.flower.wire`)."""

from __future__ import annotations

import importlib
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fedcluster.flower.wire import recv_frame, send_frame


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        from fedcluster.flower import node_work

        header, arrays = recv_frame(self.request)
        try:
            with self.server.lock:  # type: ignore[attr-defined] - one request at a time: one model, one trainer
                partition, config_yaml = int(header["partition"]), str(header["config"])
                if header["op"] == "hello":
                    send_frame(self.request, {"hello": node_work.hello(partition, config_yaml)})
                elif header["op"] == "work":
                    reply = node_work.work(partition, dict(header["task"]), arrays, config_yaml)
                    send_frame(self.request, {}, reply)
                else:
                    raise ValueError(f"unknown op {header['op']!r}")
        except Exception as e:  # noqa: BLE001 - reported to the ClientApp, which reports it to the server
            send_frame(self.request, {"error": f"{type(e).__name__}: {e}"})


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str) -> None:
        super().__init__(path, _Handler)
        self.lock = threading.Lock()


class WarmWorker:
    """The socket is bound (and queues connections) from construction; :meth:`start` starts serving and
    loads PyTorch in background threads (started after the SuperNode, so that no thread runs while the
    SuperNode's process is forked)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fedcluster-node-"))  # mkdtemp: mode 0700
        self.path = str(self.folder / "worker.sock")
        self.server = _Server(self.path)
        self.started = False

    def start(self) -> None:
        threading.Thread(target=self.server.serve_forever, name="fedcluster-node-worker", daemon=True).start()
        # PyTorch and the engine imported now, while the SuperNode connects, not when the first message waits
        threading.Thread(target=importlib.import_module, args=("fedcluster.flower.node_work",), daemon=True).start()
        self.started = True

    def close(self) -> None:
        if self.started:
            self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def warm_worker() -> Iterator[WarmWorker]:
    """A bound worker socket (``.path``), closed and removed at the end; call ``.start()`` to serve."""
    worker = WarmWorker()
    try:
        yield worker
    finally:
        worker.close()
