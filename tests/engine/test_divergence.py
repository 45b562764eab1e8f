"""A diverging run stops with exit 3 (non-finite numbers, exploded weights, or weights blown up with the loss
stuck at chance), step sizes beyond float32 are refused (exit 2), normal runs never trip the watch, and the
watch reads the device once per round."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine import divergence
from fedcluster.engine.runner import Run

QUICK = ["num_clients=6", "progress=false", "checkpoint_every=100", "threads=1"]


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("fedcluster:")]  # the federation's summary aside
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(("args", "rule"), [
    (["algorithm=fedavg", "lr=10", "rounds=5"], "has not been below chance level"),  # dead ReLUs, constant guess
    (["algorithm=fedavg", "lr=100", "rounds=3"], "grew more than 1000-fold"),
    (["algorithm=fedavg", "lr=1e6", "rounds=3"], "grew more than 1000-fold"),
    (["algorithm=fedavg", "model=logistic", "lr=1e30", "rounds=3"], "grew more than 1000-fold"),
    (["algorithm=fedavg", "model=light-cnn", "lr=1e2", "rounds=3"], "grew more than 1000-fold"),
    (["algorithm=fedrc", "lr=1e6", "rounds=3"], "grew more than 1000-fold"),
    (["algorithm=ifca", "lr=1e6", "rounds=3"], "grew more than 1000-fold"),
])
def test_a_diverging_run_stops_with_exit_3(args: list[str], rule: str, tmp_path: Path, capsys) -> None:
    assert main(["run", *QUICK, *args, f"out={tmp_path / 'run'}"]) == 3
    line = _one_line(capsys.readouterr().err)
    assert "training diverged at round" in line and rule in line and "smaller lr" in line, line


@pytest.mark.parametrize("arg", ["lr=1e39", "lr=1e300", "weight_decay=1e39", "global_lr=3.5e38", "momentum=1e300"])
def test_a_step_size_beyond_float32_is_bad_input(arg: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["run", *QUICK, "rounds=1", arg, f"out={out}"]) == 2
    line = _one_line(capsys.readouterr().err)
    key = arg.split("=")[0]
    assert f"{key}=" in line and "float32" in line and f"smaller {key}" in line, line
    assert not out.exists()


@pytest.mark.parametrize("algorithm", ["fedavg", "ifca", "fedrc", "cfl"])
def test_normal_runs_stay_far_from_the_thresholds(algorithm: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Default lr, a few seeds: the weights grow far less than STUCK_GROWTH, nothing stops."""
    seen: list[float] = []
    check = divergence.DivergenceWatch.check_queued  # every round's check (after the round, or with its scores)

    def spy(self: divergence.DivergenceWatch, values) -> None:
        check(self, values)
        seen.append(self.norm / self.reference)

    monkeypatch.setattr(divergence.DivergenceWatch, "check_queued", spy)
    for seed in (0, 1, 2):
        assert main(["run", *QUICK, f"algorithm={algorithm}", "rounds=6", f"seed={seed}",
                     f"out={tmp_path / str(seed)}"]) == 0
    assert len(seen) == 18 and max(seen) < divergence.STUCK_GROWTH / 3, max(seen)


class HostReads(TorchFunctionMode):
    """Counts the calls that copy a tensor's values to the host (each is a device sync on an accelerator)."""

    NAMES = {"__bool__", "item", "cpu", "__float__", "__int__", "__index__", "nonzero"}  # tolist/numpy: after cpu()

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in self.NAMES:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("algorithm", ["fedavg", "fedrc"])
def test_the_watch_reads_the_device_once_per_round(algorithm: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, typed = resolve(load_raw(None, [*QUICK, f"algorithm={algorithm}", "rounds=3", "engine=vectorized",
                                         f"out={tmp_path / 'run'}"]))
    run = Run(cfg, typed)
    reads = HostReads()
    trainer_watch = type(run.ctx.trainer)._watch

    def counted_watch(self, out, clients) -> None:  # training's part of the watch
        with reads:
            trainer_watch(self, out, clients)

    monkeypatch.setattr(type(run.ctx.trainer), "_watch", counted_watch)
    try:
        watch = divergence.DivergenceWatch(run.alg, run.ctx.trainer, run.fed.task, run.fed.output_dim)
        for t in range(3):
            run.play_round(t)
            before = reads.count
            with reads:
                watch.after_round(t + 1)
                watch.after_evaluation(t + 1, {"val_loss": 2.0, "test_loss": 2.0})
            assert reads.count - before == 1
        assert reads.count == 3
    finally:
        run.ctx.trainer.close()
        run.dir.release()
    assert torch.isfinite(watch.alg.models[next(iter(watch.alg.models))]).all()
