"""Hard assignments are evaluated with one model per row on the CPU: the same predictions as the Ω-mix of all K
models, a K-th of the forward work (validation rows: their client's cluster; test rows: the K models on the rows
that choose the cluster, the chosen one on the others)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.evaluation.inference import StackForward
from fedcluster.engine.evaluation.prediction import on_host
from fedcluster.engine.evaluation.scores import mix_predictions
from fedcluster.engine.params import get_params, stack
from fedcluster.engine.runner import Run
from fedcluster.models import build_model

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


@HOST_ONLY
@pytest.mark.parametrize("name", ["light-cnn", "mlp"])
@pytest.mark.parametrize("shared_body", [False, True])
def test_chosen_rows_equal_the_stacked_forward(name: str, shared_body: bool) -> None:
    torch.manual_seed(0)
    module = build_model(name, (1, 12, 12), 10)
    models = stack([get_params(build_model(name, (1, 12, 12), 10)) for _ in range(3)])
    x = torch.rand(700, 1, 12, 12)
    choice = np.random.default_rng(0).integers(0, 3, len(x))
    choice[:300] = 1  # one model's rows span several chunks
    fwd = StackForward(module)
    every = fwd(models, x, shared_body)
    chosen = fwd.chosen(models, x, choice, shared_body)
    assert chosen.shape == (1, len(x), 10)
    torch.testing.assert_close(chosen[0], every[torch.as_tensor(choice), torch.arange(len(x))], rtol=1e-5, atol=1e-6)
    assert fwd.chosen(models, x[:0], np.zeros(0, np.int64), shared_body).shape == (1, 0, 10)


def _rows_through(run: Run, what) -> tuple[torch.Tensor, int]:  # type: ignore[no-untyped-def]
    """``what()``'s result and the rows it ran through the model."""
    module, seen = run.alg.ctx.module, [0]
    forward = module.forward

    def counted(x: torch.Tensor) -> torch.Tensor:
        seen[0] += len(x)
        return forward(x)

    module.forward = counted  # type: ignore[method-assign]
    try:
        return what(), seen[0]
    finally:
        del module.forward


@pytest.mark.parametrize("method", ["ifca", "cflgp", "cfl", "fedem"])
def test_hard_methods_run_each_scored_row_through_one_model(method: str, tmp_path: Path) -> None:
    k = 1 if method == "cfl" else 3
    extra = [] if method == "cfl" else [f"algorithm.num_clusters={k}"]
    cfg, typed = resolve(load_raw(None, [f"algorithm={method}", *extra, "num_clients=9", "rounds=2", "lr=0.3",
                                         "progress=false", "threads=1", f"out={tmp_path}"]))
    run = Run(cfg, typed)
    run.execute()
    alg, val, test = run.alg, run.fed.val, run.fed.test
    k = alg.num_clusters
    hard = method != "fedem"
    assert test.fit is not None and 0 < test.fit.sum() < len(test.y)
    omega = alg.scoring_omega() if hasattr(alg, "scoring_omega") else alg.omega
    outputs = alg.outputs(val.x)
    expected = mix_predictions(outputs, torch.as_tensor(omega, dtype=torch.float32), val.owner(), "classification")
    got, rows = _rows_through(run, lambda: alg.predict(val, True))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert rows == (len(val.y) if hard else k * len(val.y))
    outputs = alg.outputs(test.x)
    w = torch.as_tensor(on_host(alg.fit_weights(outputs, test)), dtype=torch.float32)
    expected = mix_predictions(outputs, w, test.owner(), "classification")
    got, rows = _rows_through(run, lambda: alg.predict(test, False))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert rows == (k * int(test.fit.sum()) + len(test.y) if hard and k > 1 else k * len(test.y))
