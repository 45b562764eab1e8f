"""Ctrl-C held back while a round's results are written, so the message after it tells the truth."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def sigint_held() -> Iterator[None]:
    """Run the block with SIGINT held; one that arrived meanwhile is raised again when the block ends.

    A round's row, cluster record and checkpoint are then all written or none, and the runner's own
    count of finished and checkpointed rounds matches the files. Outside the main thread (where Python
    cannot set handlers) the block runs as it is. An exception leaving the block wins over a held Ctrl-C.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        signal.raise_signal(signal.SIGINT)
