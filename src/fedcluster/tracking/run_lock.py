"""One process per run directory: an exclusive lock on the directory's marker file ``.fedcluster-run``.

The marker also says "this folder is a fedcluster run directory" (a folder with other files and no
marker is never written into). The lock is a POSIX record lock (``fcntl.lockf``): the kernel drops it
when the process ends, however it ends, and forked workers (engine=pool) do not inherit it, so a run
killed with ``kill -9`` never leaves its directory locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from fedcluster.errors import UserError

MARKER = ".fedcluster-run"


class RunDirBusyError(UserError):
    """Another process holds the run directory."""


class RunLock:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / MARKER
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Create the folder and the marker, and lock it; refuse in one line if another process has it."""
        if self._fd is not None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise UserError(f"cannot use out={self.folder}: {e.strerror or e}; pass out= a writable folder") from None
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunDirBusyError(f"run directory {self.folder} is in use by another fedcluster process "
                                  f"(pid {holder}); wait for it to end or pass another out=") from None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None
