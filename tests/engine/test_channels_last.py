"""channels_last=true: the per-unit paths train convolution models in the NHWC memory format (opt-in; the default
trains in NCHW, bit for bit as before)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from fedcluster.app.cli import main
from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.models.base import build_model

PTR = np.array([0, 40, 100, 160])
SOLVER = Solver(lr=0.05, momentum=0.9, weight_decay=5e-4, batch_size=16)

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


def _train(channels_last: bool) -> tuple[dict[str, torch.Tensor], list[bool]]:
    """Three clients' units of a small CNN, trained on the sequential path; with the layouts the first convolution
    saw (whether its output was channels-last), recorded by a hook the training copy inherits."""
    torch.manual_seed(0)
    x, y = torch.randn(160, 1, 12, 12), torch.randint(0, 4, (160,))
    module = build_model("light-cnn", (1, 12, 12), 4, {})
    seen: list[bool] = []
    conv = next(m for m in module.modules() if isinstance(m, torch.nn.Conv2d))
    conv.register_forward_hook(lambda _m, _i, out: seen.append(out.is_contiguous(memory_format=torch.channels_last)
                                                               and not out.is_contiguous()))
    t = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="sequential", channels_last=channels_last)
    out = t.train(stack([get_params(module)]), np.arange(3), SOLVER, 0, init_index=np.zeros(3, dtype=np.int64))
    return {k: v.clone() for k, v in out.items()}, seen


@HOST_ONLY
def test_channels_last_trains_in_nhwc_to_the_default_models_up_to_rounding() -> None:
    default, default_seen = _train(False)
    nhwc, nhwc_seen = _train(True)
    assert default_seen and not any(default_seen)  # the default stays NCHW (its results unchanged)
    assert nhwc_seen and all(nhwc_seen)
    for k in default:
        assert nhwc[k].is_contiguous()  # the result stack keeps its layout
        torch.testing.assert_close(nhwc[k], default[k], rtol=1e-4, atol=1e-5)


def test_channels_last_reaches_the_trainer_and_is_recorded_with_the_run(tmp_path: Path) -> None:
    from fedcluster.config.run_config import load_raw, resolve
    from fedcluster.engine.runner import Run

    keys = ["model=light-cnn", "device=cpu", "engine=sequential", "channels_last=true", "rounds=1", "num_clients=4",
            "progress=false"]
    run = Run(*resolve(load_raw(None, [*keys, f"out={tmp_path / 'r'}"])))
    assert run.ctx.trainer.channels_last is True
    run.execute()
    assert yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())["channels_last"] is True


@pytest.mark.parametrize("keys", [["engine=vectorized"], ["model=mlp", "engine=auto"]])
def test_channels_last_is_refused_where_no_path_offers_it(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          keys: list[str]) -> None:
    assert main(["run", "device=cpu", "model=light-cnn", *keys, "channels_last=true", "rounds=1", "progress=false",
                 f"out={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "channels_last=true" in err[0] and "engine=sequential" in err[0]


def test_a_bad_channels_last_value_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "channels_last=sometimes", "rounds=1", "progress=false", f"out={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "channels_last" in err[0]


def test_a_flower_node_trains_with_channels_last() -> None:
    from fedcluster.flower import node_work

    config = "num_clients: 3\nmodel: light-cnn\nengine: sequential\nchannels_last: true\nprogress: false\n"
    assert node_work.node_data(0, config).trainer.channels_last is True
