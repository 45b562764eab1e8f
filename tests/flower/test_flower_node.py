"""``fedcluster flower node``: a taken port and a SuperLink that never answers end quickly with one line and
exit status 2; stopping the wrapper stops the SuperNode and everything it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.flower.process import run_forwarding_signals

SRC = str(Path(__file__).resolve().parents[2] / "src")


def gone(pid: int) -> bool:
    """True when no process ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_until(predicate, timeout: float) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_taken_port_is_one_line_naming_port(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["flower", "node", "--insecure", "--partition-id", "1", "--port", str(port)]) == 2
    err = one_line_error(capsys)
    assert "already in use" in err and "--port" in err


@pytest.mark.parametrize("listening", [False, True], ids=["refused", "never-answers"])
def test_a_superlink_that_does_not_answer_fails_fast(listening: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """A closed port, and a port that accepts connections but never replies (listen without accept)."""
    with socket.socket() as link, socket.socket() as node_port:
        link.bind(("127.0.0.1", 0))
        node_port.bind(("127.0.0.1", 0))
        if listening:
            link.listen()
        address = f"127.0.0.1:{link.getsockname()[1]}"
        free = str(node_port.getsockname()[1])
        node_port.close()
        start = time.monotonic()
        code = main(["flower", "node", "--insecure", "--partition-id", "0", "--port", free, "--superlink", address,
                     "--connect-timeout", "1.5"])
        elapsed = time.monotonic() - start
    assert code == 2
    err = one_line_error(capsys)
    assert address in err and "--connect-timeout" in err
    assert elapsed < 6, elapsed


CHILD = textwrap.dedent("""
    import subprocess, sys, time
    grandchild = subprocess.Popen(["sleep", "600"])
    open(sys.argv[1], "w").write(f"{grandchild.pid}\\n")
    time.sleep(600)
""")


@contextmanager
def wrapper_of_a_child(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int, int]]:
    """A process running ``run_forwarding_signals`` on a child that starts a grandchild; (wrapper, child pid,
    grandchild pid) once both run. The wrapper prints the child's exit status and the signal it got."""
    (tmp_path / "child.py").write_text(CHILD)
    pids = tmp_path / "pids"
    wrapper_code = ("import os, sys; from fedcluster.flower.process import run_forwarding_signals as run; "
                    f"code, sig = run([sys.executable, {str(tmp_path / 'child.py')!r}, {str(pids)!r}], os.environ); "
                    "print(code, sig)")
    wrapper = subprocess.Popen([sys.executable, "-c", wrapper_code], env={**os.environ, "PYTHONPATH": SRC},
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = grandchild = 0
    try:
        assert wait_until(lambda: pids.exists() and pids.read_text().endswith("\n"), 30), "the child never started"
        grandchild = int(pids.read_text())
        child = int(Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children").read_text().split()[0])
        yield wrapper, child, grandchild
    finally:
        for pid in (wrapper.pid, child, grandchild):
            if pid and not gone(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_wrapper_stops_the_child_and_its_children(sig: int, tmp_path: Path) -> None:
    """The wrapper (as ``flower node`` runs the SuperNode) gets the signal alone, as from ``kill PID``; the
    child and the process the child started must end with it."""
    with wrapper_of_a_child(tmp_path) as (wrapper, child, grandchild):
        os.kill(wrapper.pid, sig)
        out, _ = wrapper.communicate(timeout=30)
        assert out.split() == [str(-sig), str(int(sig))]  # the child ended by the forwarded signal
        assert wait_until(lambda: gone(child) and gone(grandchild), 10), "the wrapper's children outlived it"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_wrapper_killed_outright_takes_its_child_along(tmp_path: Path) -> None:
    """SIGKILL cannot be passed on; the child still ends (Linux sends it SIGTERM when its parent dies)."""
    with wrapper_of_a_child(tmp_path) as (wrapper, child, _):
        wrapper.kill()
        wrapper.wait(timeout=10)
        assert wait_until(lambda: gone(child), 10), "the child outlived its killed wrapper"


def test_the_childs_exit_status_comes_back() -> None:
    assert run_forwarding_signals([sys.executable, "-c", "raise SystemExit(7)"], os.environ) == (7, None)


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
            out += kids
            todo += kids
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_of_a_real_node_wrapper_stops_the_supernode(tmp_path: Path) -> None:
    """A real SuperLink and ``fedcluster flower node``: ``kill WRAPPER_PID`` ends the SuperNode and what it
    started (its SuperExec)."""
    pytest.importorskip("flwr")
    from tests.support.flower_cluster import Cluster

    c = Cluster(tmp_path)
    try:
        c.start_link()
        c.start_node(0)
        wrapper = c.procs["node0"]
        assert wait_until(lambda: len(_descendants(wrapper.pid)) >= 2, 120), c.log_tail("node0")
        below = _descendants(wrapper.pid)  # flower-supernode and its flower-superexec
        os.kill(wrapper.pid, signal.SIGTERM)  # the wrapper alone, as `kill PID` does
        wrapper.wait(timeout=40)
        assert wait_until(lambda: all(gone(p) for p in below), 10), c.log_tail("node0")
    finally:
        c.close()
