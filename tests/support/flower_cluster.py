"""A real Flower federation on loopback for the tests: one ``flower-superlink`` and N SuperNodes (started
with ``fedcluster flower node``) as subprocesses on free ports, each in its own process group so that the
finaliser can end it and everything it started. Every wait is bounded."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch

from fedcluster.tracking.run_dir import RunDir

SRC = str(Path(__file__).resolve().parents[2] / "src")
BIN = str(Path(sys.executable).parent)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class Cluster:
    """SuperLink + SuperNodes; ``tls`` is None (--insecure) or (ca, cert, key) PEM paths."""

    def __init__(self, tmp: Path, tls: tuple[Path, Path, Path] | None = None, extra_link: list[str] | None = None
                 ) -> None:
        self.tmp, self.tls = tmp, tls
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    "PATH": BIN + os.pathsep + os.environ.get("PATH", ""), "FLWR_HOME": str(tmp / "flwr-home"),
                    "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        self.procs: dict[str, subprocess.Popen] = {}
        self.extra_link = extra_link or []

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen:
        log = (self.tmp / f"{name}.log").open("ab")
        p = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, cwd=self.tmp)
        self.procs[name] = p
        return p

    def security(self, server: bool) -> list[str]:
        if self.tls is None:
            return ["--insecure"]
        ca, cert, key = self.tls
        if server:
            return ["--ssl-ca-certfile", str(ca), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
        return ["--root-certificates", str(ca)]

    def start_link(self, timeout: float = 60) -> None:
        self._start("superlink", [f"{BIN}/flower-superlink", *self.security(True), "--port", str(self.port),
                                  "--database", str(self.tmp / "state.db"), *self.extra_link])
        wait_port(self.port, timeout)

    def start_node(self, partition: int, extra: list[str] | None = None) -> None:
        self._start(f"node{partition}", [sys.executable, "-m", "fedcluster.app.cli", "flower", "node",
                                         "--superlink", self.address, "--partition-id", str(partition),
                                         "--port", str(free_port()), *self.security(False), *(extra or [])])

    def stop(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(timeout=10)
                return
            except subprocess.TimeoutExpired:
                continue

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def serve_cmd(self, args: list[str]) -> list[str]:
        return [sys.executable, "-m", "fedcluster.app.cli", "flower", "serve", "--superlink", self.address,
                *self.security(False), *args]

    def serve(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(self.serve_cmd(args), env=self.env, capture_output=True, text=True, timeout=timeout,
                              cwd=self.tmp)

    def serve_async(self, args: list[str], name: str = "serve") -> subprocess.Popen:
        """``fedcluster flower serve`` in the background, its output in ``NAME.log`` (ended by :meth:`close` if
        still running)."""
        return self._start(name, self.serve_cmd(args))

    def log_tail(self, name: str, chars: int = 6000) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_bytes()[-chars:].decode(errors="replace") if path.exists() else f"(no {path})"

    def run_cli(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fedcluster.app.cli", *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout, cwd=self.tmp)


def wait_for(predicate, timeout: float, what: str, interval: float = 1.0) -> None:  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"{what} did not happen within {timeout} s")


def final_models(run_dir: Path) -> dict[str, torch.Tensor]:
    """The models of a run's last checkpoint, read through the safe state-file format (no pickle)."""
    return RunDir(run_dir).load_checkpoint()["algorithm"]["models"]
