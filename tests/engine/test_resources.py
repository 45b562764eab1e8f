"""Resources and caps: lazy participation (same cohorts as before), memory estimates that refuse early,
batch_size/workers/threads caps, num_clusters vs clients, missing validation data, decompression bombs,
``out=`` checks and Ctrl-C during start-up."""

from __future__ import annotations

import csv
import gzip
import io
import os
import signal
import subprocess
import sys
import tracemalloc
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.sources.idx import read_idx
from fedcluster.engine import memory
from fedcluster.engine.runner import Run
from fedcluster.engine.sampling import ParticipationStream
from fedcluster.errors import DataFileError
from fedcluster.models.base import build_model

FAST = ["num_clients=6", "rounds=2", "progress=false"]


def _eager_stream(num_clients: int, cohort: int, rounds: int, seed: int) -> np.ndarray:
    """The participation generator of fedcluster <= 0.1.0, kept verbatim as the reference."""
    rng = np.random.default_rng([seed, 1])
    if cohort == num_clients:
        return np.tile(np.arange(num_clients), (rounds, 1))
    return np.stack([np.sort(rng.choice(num_clients, cohort, replace=False)) for _ in range(rounds)])


@pytest.mark.parametrize(("n", "cohort", "seed"), [(20, 10, 0), (7, 3, 5), (100, 1, 123), (6, 6, 2), (50, 49, 9)])
def test_lazy_participation_repeats_the_old_cohorts(n: int, cohort: int, seed: int) -> None:
    old = _eager_stream(n, cohort, 40, seed)
    lazy = ParticipationStream(n, cohort, 40, seed)
    np.testing.assert_array_equal(np.stack([lazy[t] for t in range(40)]), old)
    for t in (39, 3, 17, 17, 0, 25):  # random access (a resume, a test re-reading a round) gives the same ids
        np.testing.assert_array_equal(lazy[t], old[t])
    fresh = ParticipationStream(n, cohort, 40, seed)
    np.testing.assert_array_equal(fresh[30], old[30])  # a resume at round 30 starts mid-stream


def test_participation_for_a_billion_rounds_costs_no_memory() -> None:
    tracemalloc.start()
    stream = ParticipationStream(1000, 10, 10**9, 0)
    first = [stream[t] for t in range(5)]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(stream) == 10**9 and peak < 1 << 20
    np.testing.assert_array_equal(np.stack(first), _eager_stream(1000, 10, 5, 0))
    with pytest.raises(IndexError):
        stream[10**9]


def _err(argv: list[str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(argv)
    return rc, err.getvalue().splitlines()


def _one_error(argv: list[str]) -> str:
    rc, lines = _err(argv)
    errors = [ln for ln in lines if ln.startswith("fedcluster: error: ")]
    assert rc == 2 and len(errors) == 1 and not any("Traceback" in ln for ln in lines), lines
    return errors[0]


# sized so that the limit is exceeded by a few times only: should the check break, the run stays affordable
@pytest.mark.parametrize(("extra", "needles", "limit"), [
    (["model.hidden=20000"], ["training needs", "units take most", "model"], "50M"),
    (["local_epochs=1000"], ["training needs", "schedules take most", "local_epochs"], "20M"),  # 1000: its bound
    (["algorithm=fedsoft", "algorithm.num_clusters=6", "model.hidden=5000"], ["6 cluster(s)", "num_clusters"], "50M"),
])
def test_training_that_would_not_fit_is_refused_with_the_knob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              extra: list[str], needles: list[str],
                                                              limit: str) -> None:
    monkeypatch.setenv("FEDCLUSTER_MEMORY_LIMIT", limit)
    line = _one_error(["run", *FAST, f"out={tmp_path / 'r'}", *extra])
    assert all(n in line for n in needles), line
    assert not (tmp_path / "r").exists()


def test_training_that_fits_in_smaller_calls_runs_in_them_on_the_cpu(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """18 units of a 1.3 M-parameter MLP do not fit 250 MB at once, a few at a time do: the run trains in smaller
    vectorised calls (a note says how many units per call) and gives the models of a run told that chunk_mb."""
    run = [*FAST, "algorithm=ifca", "algorithm.num_clusters=3", "model.hidden=[20000]", "engine=vectorized"]
    monkeypatch.setenv("FEDCLUSTER_MEMORY_LIMIT", "250M")
    rc, lines = _err(["run", *run, f"out={tmp_path / 'limited'}"])
    assert rc == 0, lines
    notes = [ln for ln in lines if "units per vectorised call" in ln]
    assert len(notes) == 1 and "chunk_mb=" in notes[0], lines
    chunk_mb = yaml.safe_load((tmp_path / "limited" / "config.yaml").read_text())["chunk_mb"]
    assert chunk_mb is not None and chunk_mb < 250
    monkeypatch.delenv("FEDCLUSTER_MEMORY_LIMIT")
    assert main(["run", *run, f"chunk_mb={chunk_mb}", f"out={tmp_path / 'told'}"]) == 0
    rows = [(tmp_path / d / "rounds.csv").read_text().splitlines() for d in ("limited", "told")]
    strip = [[",".join(c for i, c in enumerate(r.split(",")) if i != t) for r in rs]
             for rs, t in ((rs, rs[0].split(",").index("seconds")) for rs in rows)]
    assert strip[0] == strip[1]


def test_synthetic_federation_too_large_is_refused_before_it_is_generated(tmp_path: Path) -> None:
    line = _one_error(["run", *FAST, "dataset=mixed-regression", "scenario=mixed-regression",
                       "scenario.sizes=100000000x100000", f"out={tmp_path / 'r'}"])
    assert "mixed-regression federation needs" in line and "scenario.sizes" in line


@pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")
@pytest.mark.parametrize("model", ["mlp", "logistic", "cnn", "resnet18"])
def test_one_footprint_for_the_refusal_and_the_chunks(model: str) -> None:
    """The refusal measures a parameter-free model on the meta device, the trainer its real module: the same
    parameter and activation bytes, so both size a unit alike."""
    shape = (3, 32, 32) if model == "resnet18" else (1, 8, 8)
    cfg, typed = resolve(load_raw(None, [f"model={model}"]))

    class Fed:  # what the estimate reads of a federation
        input_shape, output_dim = shape, 10

    meta = memory.model_footprint(cfg, typed, Fed)  # type: ignore[arg-type]
    real = build_model(model, shape, 10, typed["model"])
    real.train()
    assert meta is not None and meta.params == sum(p.numel() * 4 for p in real.parameters())
    assert meta.activations >= 10 * 4
    assert memory.footprint(real, shape) == meta and real.training  # the module's mode is left as it was
    # a model that cannot run on the meta device is measured on a real sample instead (or not at all)
    class NoMeta(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * float(x.sum().item() >= 0)

    assert memory.footprint(NoMeta(), (4,)) is None
    assert memory.footprint(NoMeta(), (4,), torch.ones(2, 4)) == memory.UnitFootprint(15 * 4, 3 * 4)


def test_estimate_is_the_same_order_as_the_real_allocation(tmp_path: Path) -> None:
    """The estimate for a big MLP holds each unit's start and result and the working copies of the units
    trained at once: between 6 and 8 times the parameter memory of the cohort's models."""
    cfg, typed = resolve(load_raw(None, [*FAST, "model.hidden=20000", f"out={tmp_path}"]))
    run = Run(cfg, typed)
    est = memory.estimate_training(cfg, typed, run.fed, 1, cfg.cohort_size())
    assert est is not None
    per_model = sum(v.numel() * 4 for v in run.alg.models.values())
    params = est.models + est.units + min(est.count, memory.MAX_UNITS) * est.unit_params  # every parameter copy
    assert per_model * cfg.cohort_size() * 6 <= params <= per_model * cfg.cohort_size() * 8


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_caps_batch_size_workers_threads_with_notes(tmp_path: Path) -> None:
    rc, lines = _err(["run", *FAST, "batch_size=1000000", "workers=40", "threads=100000", "engine=pool", "device=cpu",
                      f"out={tmp_path / 'a'}"])
    assert rc == 0
    notes = [ln for ln in lines if ln.startswith("fedcluster: note: ")]
    assert any("batch_size=1000000" in n for n in notes) and any("workers=40" in n for n in notes)
    assert any("threads=100000" in n for n in notes)
    cfg = yaml.safe_load((tmp_path / "a" / "config.yaml").read_text())
    assert cfg["workers"] == 6 and cfg["threads"] <= (os.cpu_count() or 1)
    largest = cfg["batch_size"]
    assert largest < 1000000
    # the capped run is exactly the run with batch_size = the largest client
    assert main(["run", *FAST, f"batch_size={largest}", "engine=pool", "device=cpu", f"out={tmp_path / 'b'}"]) == 0
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(_rows(tmp_path / "a" / "rounds.csv")) == strip(_rows(tmp_path / "b" / "rounds.csv"))


def test_more_clusters_than_clients_is_refused(tmp_path: Path) -> None:
    line = _one_error(["run", *FAST, "algorithm=ifca", "algorithm.num_clusters=1000", f"out={tmp_path / 'r'}"])
    assert "algorithm.num_clusters=1000" in line and "6 clients" in line


def test_no_validation_data_reports_nan_not_zero(tmp_path: Path) -> None:
    rc, lines = _err(["run", *FAST, "scenario.val_fraction=0", f"out={tmp_path}"])
    assert rc == 0 and any("no client has validation data" in ln for ln in lines)
    rows = _rows(tmp_path / "rounds.csv")
    assert all(r["val_acc"] == "nan" and r["val_loss"] == "nan" for r in rows)
    assert all(0 < float(r["test_acc"]) <= 1 for r in rows)
    assert all(c["val_acc"] == "nan" for c in _rows(tmp_path / "clients.csv"))


def test_gzip_bomb_is_refused_before_it_is_inflated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big")  # 10 labels: 18 bytes in all
    (tmp_path / "bomb.gz").write_bytes(gzip.compress(header + bytes(10) + bytes(50_000_000)))
    inflated: list[int] = []
    real_read = gzip.GzipFile.read

    def counting_read(self: gzip.GzipFile, size: int = -1) -> bytes:
        data = real_read(self, size)
        inflated.append(len(data))
        return data

    monkeypatch.setattr(gzip.GzipFile, "read", counting_read)
    with pytest.raises(DataFileError, match="gzip trailer"):
        read_idx(tmp_path / "bomb.gz")
    assert sum(inflated) <= len(header)
    # a header that claims more than the compressed bytes can hold is refused before inflating too
    huge = bytes([0, 0, 8, 3]) + b"".join(n.to_bytes(4, "big") for n in (60000, 2800, 2800))
    (tmp_path / "claims.gz").write_bytes(gzip.compress(huge + bytes(100)))
    with pytest.raises(DataFileError, match="gzip trailer|can inflate"):
        read_idx(tmp_path / "claims.gz")
    # a valid file still reads
    (tmp_path / "ok.gz").write_bytes(gzip.compress(header + bytes(range(10))))
    np.testing.assert_array_equal(read_idx(tmp_path / "ok.gz"), np.arange(10))


def test_out_must_be_a_writable_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    assert "existing file" in _one_error(["run", *FAST, f"out={afile}"])
    assert "is a file" in _one_error(["run", *FAST, f"out={afile / 'sub'}"])
    assert "/dev" in _one_error(["run", *FAST, "out=/dev/null"])
    assert "/proc" in _one_error(["run", *FAST, "out=/proc/x"])
    monkeypatch.setattr(os, "access", lambda *_a, **_k: False)  # root ignores permissions: simulate read-only
    assert "not writable" in _one_error(["run", *FAST, f"out={tmp_path / 'ro' / 'run'}"])


def test_ctrl_c_during_start_up_is_one_line_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Run, "__init__", interrupted)
    rc, lines = _err(["run", *FAST, f"out={tmp_path}"])
    assert rc == 130 and lines == ["fedcluster: interrupted during start-up; nothing was run"]


def test_ctrl_c_during_start_up_real_process(tmp_path: Path) -> None:
    """SIGINT while the config is being resolved (held there by a sleep): one line, exit 130."""
    code = ("import signal, sys, time, fedcluster.config.run_config as c\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even under `&`\n"
            "real = c.resolve\n"
            "def slow(raw):\n"
            "    print('resolving', file=sys.stderr, flush=True); time.sleep(60); return real(raw)\n"
            "c.resolve = slow\n"
            "from fedcluster.app.cli import main\n"
            "sys.exit(main(['run', 'rounds=1', 'progress=false']))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert proc.stderr is not None
    assert proc.stderr.readline().strip() == "resolving"
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert rest.splitlines() == ["fedcluster: interrupted during start-up; nothing was run"], rest


def test_seeds_up_to_2_32_run_and_beyond_are_refused(tmp_path: Path) -> None:
    assert main(["run", "num_clients=4", "rounds=1", "progress=false", f"seed={2**32 - 1}",
                 f"out={tmp_path / 'a'}"]) == 0
    assert "0..4294967295" in _one_error(["run", *FAST, f"seed={2**32}"])
    assert "data_seed=-1" in _one_error(["run", *FAST, "data_seed=-1"])


def test_ever_sampled_is_the_union_of_the_streams_cohorts() -> None:
    from fedcluster.engine.sampling import participation_stream

    stream = participation_stream(50, 3, 10, seed=4)
    union = np.zeros(50, dtype=bool)
    for t in range(6):
        union[stream[t]] = True
    assert np.array_equal(stream.ever_sampled(6), union)
    assert 0 < union.sum() < 50  # a partial cover, so the check is not trivially all-True
