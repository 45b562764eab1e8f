"""Starting a Flower SuperNode from ``fedcluster flower node``: checks that fail fast with one line (the
node's port is free, the SuperLink can be reached) and a child process that stops with its wrapper."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Mapping

from fedcluster.errors import UserError

DEFAULT_NODE_PORT = 9094  # flower-supernode's Runtime API port (127.0.0.1), one per node on a machine
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GRACE_SECONDS = 20.0  # after a forwarded signal, how long the SuperNode may take before it is killed


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """One line naming ``--port`` when another process (usually another SuperNode) listens on ``port``."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the SuperNode's server binds it
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise UserError(f"cannot use port {port} on {host} for this node ({e.strerror}); pick another "
                                "with --port") from None
            raise UserError(f"port {port} on {host} is already in use (another SuperNode on this machine?); give "
                            f"each node on one machine its own port, e.g. --port {port + 1}") from None


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for IPv6) as (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--superlink {address!r} is not HOST:PORT (e.g. 10.0.0.5:8000)")
    return host.strip("[]"), int(port)


def superlink_answers(host: str, port: int, timeout: float, root_certificates: str | None) -> None:
    """One HTTP request to the SuperLink (its APIs are HTTP on one port); raises OSError unless an HTTP
    answer of any status comes back within ``timeout`` seconds. ``root_certificates``: verify TLS with this
    CA; None: plain HTTP."""
    if root_certificates is None:
        conn: http.client.HTTPConnection = http.client.HTTPConnection(host, port, timeout=timeout)
    else:
        context = ssl.create_default_context(cafile=root_certificates)
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    try:
        conn.request("GET", "/")
        conn.getresponse().read()
    except http.client.HTTPException as e:
        raise OSError(f"not an HTTP answer ({type(e).__name__})") from None
    finally:
        conn.close()


def wait_for_superlink(address: str, timeout: float, root_certificates: str | None = None,
                       attempt_every: float = 1.0) -> None:
    """Return once the SuperLink answers an HTTP request; one line after ``timeout`` seconds without an
    answer (a refused port, an unknown host, an address that never answers, a certificate that fails)."""
    host, port = split_address(address)
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        try:
            superlink_answers(host, port, max(min(left, 10.0), 0.1), root_certificates)
            return
        except ssl.SSLCertVerificationError as e:
            raise UserError(f"the SuperLink at {address} presented a certificate that --root-certificates does not "
                            f"verify ({e.verify_message}); use the CA that signed it, and a server certificate "
                            "whose names include the host you connect to") from None
        except OSError as e:
            reason = str(e.strerror or e) or type(e).__name__
        left = end - time.monotonic()
        if left <= 0:
            raise UserError(f"the SuperLink at {address} did not answer within --connect-timeout={timeout:g} s "
                            f"({reason}); check that it runs, listens on that address (flower-superlink --host "
                            "0.0.0.0 for other machines) and is not blocked by a firewall")
        time.sleep(min(attempt_every, left))


def _child_setup() -> Callable[[], None]:
    """The ``preexec_fn`` of the wrapped child: SIGINT back to its default action (a shell that starts the wrapper
    in the background leaves SIGINT ignored, and an ignored signal stays ignored across exec, so the node would
    ignore the SIGINT the wrapper passes on) and, on Linux, SIGTERM to the child when this process dies, even by
    SIGKILL (``prctl(PR_SET_PDEATHSIG)``). The C function is looked up now: after the fork the child only calls
    it."""
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def setup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if prctl is not None:
            prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return setup


def run_forwarding_signals(cmd: list[str], env: Mapping[str, str], on_start: Callable[[], None] | None = None
                           ) -> tuple[int, int | None]:
    """Run ``cmd`` in its own process group and pass SIGTERM, SIGINT and SIGHUP on to that whole group (the
    SuperNode and what it starts), so that stopping the wrapper stops the node; if the wrapper is killed
    outright (SIGKILL), Linux sends the child SIGTERM. A group that has not ended ``GRACE_SECONDS`` after a
    signal is killed. ``on_start`` runs once the child exists (start threads there, not before the fork).
    (The child's exit status, the first signal received or None.)"""
    child = subprocess.Popen(cmd, env=dict(env), start_new_session=True, preexec_fn=_child_setup())
    if on_start is not None:
        try:
            on_start()
        except BaseException:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise
    received: list[int] = []

    def forward(signum: int, frame: object) -> None:
        received.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    deadline: float | None = None
    try:
        while True:
            try:
                code = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if received and deadline is None:
                    deadline = time.monotonic() + GRACE_SECONDS
                if deadline is not None and time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(child.pid, signal.SIGKILL)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        with contextlib.suppress(ProcessLookupError):  # whatever the node started and left behind
            os.killpg(child.pid, signal.SIGKILL)
    return code, (received[0] if received else None)
