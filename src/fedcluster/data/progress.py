"""A progress bar for building a federation (stderr), switched on by ``build_federation`` when the run config
says ``progress=true``; scenarios called directly (tests, library code) stay silent."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")
_ENABLED: ContextVar[bool] = ContextVar("fedcluster_build_progress", default=False)


@contextmanager
def build_progress(enabled: bool) -> Iterator[None]:
    """Show (or hide) build progress bars inside this block."""
    token = _ENABLED.set(enabled)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def progress(items: Iterable[T], total: int, desc: str) -> Iterable[T]:
    """``items`` wrapped in a tqdm bar on stderr when build progress is on, else unchanged."""
    if not _ENABLED.get():
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc=desc, unit="client", file=sys.stderr, leave=False, dynamic_ncols=True)
