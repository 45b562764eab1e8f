"""Atomic file writes: a temporary file in the same folder, fsync, ``os.replace``; nothing half-written.

A crash or a full disk leaves either the old file or the new one, never a mix, and no temporary file
(a ``kill -9`` mid-write can leave one; :func:`remove_stale_temporaries` clears those of dead processes).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from fedcluster.errors import UserError

_TMP = re.compile(r"^\..+\.(\d+)\.tmp$")  # .NAME.PID.tmp


class StorageError(UserError):
    """A file could not be written (disk full, read-only folder, ...); the message names it and the fix."""


def storage_error(e: OSError, path: Path, hint: str) -> StorageError:
    reason = e.strerror or str(e)
    return StorageError(f"cannot write {path}: {reason}; {hint}")


def temporary_path(path: Path) -> Path:
    return path.parent / f".{path.name}.{os.getpid()}.tmp"


def atomic_write(path: Path, data: bytes | Callable[[BinaryIO], None], hint: str = "free some space") -> None:
    """Replace ``path`` by ``data`` (bytes, or a function writing to the open file) in one step.

    Raises :class:`StorageError` (the temporary file removed, ``path`` untouched) when writing fails.
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        with tmp.open("wb") as f:
            if isinstance(data, bytes | bytearray | memoryview):
                f.write(data)
            else:
                data(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise storage_error(e, path, hint) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: some file systems refuse it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(folder: Path, everyone: bool = False) -> list[Path]:
    """Delete the temporary files that killed writers left in ``folder`` (all of them when ``everyone``,
    e.g. under the run-directory lock; else only those of processes that no longer exist)."""
    removed = []
    with contextlib.suppress(OSError):
        for p in Path(folder).iterdir():
            m = _TMP.match(p.name)
            if m and p.is_file() and (everyone or not _alive(int(m.group(1)))):
                with contextlib.suppress(OSError):
                    p.unlink()
                    removed.append(p)
    return removed


@contextlib.contextmanager
def writing(path: Path, hint: str) -> Iterator[None]:
    """Turn an OSError while writing ``path`` into one clear :class:`StorageError`."""
    try:
        yield
    except OSError as e:
        raise storage_error(e, path, hint) from None
