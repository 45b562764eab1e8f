"""The frames between a ClientApp process and its node's warm worker (``fedcluster flower node``): a JSON
header and the arrays as safetensors, each length-prefixed. Nothing here can execute code when read."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import numpy as np
from safetensors.numpy import load, save

WORKER_ENV = "FEDCLUSTER_NODE_WORKER"  # the warm worker's Unix socket, for the ClientApp processes
ARRAYS, TASK, RUN = "arrays", "task", "run"  # the records of a request message (fedcluster.flower.records)
_LEN = struct.Struct(">Q")
MAX_FRAME = 1 << 36  # 64 GiB: a length beyond it is a corrupt frame, not a model


def _send_blob(sock: socket.socket, blob: bytes) -> None:
    sock.sendall(_LEN.pack(len(blob)) + blob)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection mid-frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv_blob(sock: socket.socket) -> bytes:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if n > MAX_FRAME:
        raise ConnectionError(f"frame of {n} bytes refused")
    return _recv_exact(sock, n)


def send_frame(sock: socket.socket, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    """One frame: ``header`` (JSON-able) and ``arrays`` (numeric numpy arrays)."""
    _send_blob(sock, json.dumps(header).encode())
    _send_blob(sock, save({k: np.require(v, requirements="C") for k, v in (arrays or {}).items()}))


def recv_frame(sock: socket.socket) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    header = json.loads(_recv_blob(sock).decode())
    if not isinstance(header, dict):
        raise ConnectionError("frame header is not a JSON object")
    return header, load(_recv_blob(sock))
