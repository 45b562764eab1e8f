"""Every registered method that can run on several processes gives the single-process rounds.csv on two gloo
ranks (slow: two interpreters run every method in one process group; the harness is tests/engine/test_distributed.py's).
A method whose server reads clients' inputs row by row (``Algorithm.reads_every_input``) is refused on ranks by
design and left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run
from tests.conformance.methods import names, own_keys
from tests.engine.test_distributed import TINY, _check


def _spec(name: str) -> list[str]:
    return [*TINY, f"algorithm={name}", *own_keys(name)]


def _runs_on_ranks(name: str, out: Path) -> bool:
    cfg, typed = resolve(load_raw(None, [*_spec(name), f"out={out}"]))
    run = Run(cfg, typed)
    try:
        return run.alg.reads_every_input() is None
    finally:
        run.dir.abandon()


@pytest.mark.slow
def test_every_method_gives_the_single_process_rounds_on_two_ranks(tmp_path: Path) -> None:
    methods = [n for n in names() if _runs_on_ranks(n, tmp_path / "probe" / n)]
    assert len(methods) >= len(names()) // 2, methods  # the filter leaves out a few methods, not most
    _check(tmp_path, {n: _spec(n) for n in methods})
