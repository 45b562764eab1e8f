"""New folders with default names (``runs/<time>-...``, ``compare-<time>``) that never collide.

Light on purpose (standard library only): ``fedcluster compare`` and the Flower commands use it without
importing torch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from fedcluster.errors import UserError


def stamp() -> str:
    """The local time in the names of default folders: ``20250131-235959``."""
    return time.strftime("%Y%m%d-%H%M%S")


def claim_new_dir(base: Path) -> Path:
    """Create the folder ``base``, or ``base-2``, ``base-3``, ... when it is taken, and return it.

    ``mkdir`` either creates a folder or fails because it exists, so two processes (or two runs started in
    the same second) never get the same folder, however they interleave."""
    base, n = Path(base), 1
    path = base
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
            return path
        except FileExistsError:
            if not path.parent.is_dir():  # a file where the parent folder should be
                raise UserError(f"cannot create {path}: {path.parent} is not a folder; choose another folder "
                                "(out=, --out)") from None
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        except OSError as e:
            raise UserError(f"cannot create {path}: {e.strerror or e}; choose a folder you can write to "
                            "(out=, --out)") from None


@contextlib.contextmanager
def removed_if_empty(path: Path) -> Iterator[None]:
    """Remove the folder ``path`` when the block fails and nothing was written into it (a run refused after
    its folder was claimed leaves no trace)."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            Path(path).rmdir()  # fails, and keeps the folder, unless it is empty
        raise
