"""Shared test set-up: federations are cached in a per-session temporary folder, never in ~/.cache."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

import fedcluster.builtin  # noqa: F401  (register everything)


@pytest.fixture(autouse=True, scope="session")
def _federation_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    mp = pytest.MonkeyPatch()
    mp.setenv("FEDCLUSTER_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture
def terminal_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt, as in a terminal, even when pytest was started in the background
    (a shell starts background jobs with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
