"""A run's ``threads`` bounds NumPy's BLAS as it bounds torch: OpenBLAS's own threads, one per core, spin on cores
that other work shares (a CFL-GP clustering step 20× slower on a busy machine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_a_runs_threads_limit_numpys_blas_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, typed = resolve(load_raw(None, ["algorithm=cflgp", "num_clients=6", "rounds=2", "threads=1",
                                         "progress=false", f"out={tmp_path / 'run'}"]))
    run = Run(cfg, typed)
    seen: list[list[int]] = []
    play = Run.play_round

    def watched(self: Run, t: int):  # type: ignore[no-untyped-def]
        seen.append(_blas_threads())
        return play(self, t)

    monkeypatch.setattr(Run, "play_round", watched)
    with threadpool_limits(limits=2, user_api="blas"):  # as OpenBLAS starts on a 2-core machine
        before = _blas_threads()
        run.execute()
        assert _blas_threads() == before  # restored after the run
    assert seen and all(threads == [1] * len(threads) and threads for threads in seen)
