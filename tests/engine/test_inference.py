"""The inference-optimised forward of K stacked models equals the eager one."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call

from fedcluster.engine.evaluation.inference import StackForward
from fedcluster.engine.evaluation.scores import model_outputs
from fedcluster.engine.params import get_params, stack
from fedcluster.models import build_model

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


@HOST_ONLY
@pytest.mark.parametrize("name", ["light-cnn", "mlp"])
def test_stack_forward_matches_eager(name: str) -> None:
    torch.manual_seed(0)
    module = build_model(name, (1, 12, 12), 10)
    models = stack([get_params(build_model(name, (1, 12, 12), 10)) for _ in range(3)])
    x = torch.rand(300, 1, 12, 12)
    fwd = StackForward(module)
    torch.testing.assert_close(fwd(models, x, chunk=128), model_outputs(module, models, x), rtol=1e-5, atol=1e-5)
    # shared body: body of model 0, each model's head
    for n, v in models.items():
        if n.startswith("body."):
            v[1:] = v[0]
    ref = torch.stack([functional_call(module, {n: v[k] for n, v in models.items()}, (x,)) for k in range(3)])
    torch.testing.assert_close(fwd(models, x, shared_body=True, chunk=128), ref, rtol=1e-5, atol=1e-5)


@HOST_ONLY
def test_cache_follows_in_place_updates() -> None:
    module = build_model("light-cnn", (1, 12, 12), 10)
    models = stack([get_params(module) for _ in range(2)])
    x = torch.rand(10, 1, 12, 12)
    fwd = StackForward(module)
    before = fwd(models, x)
    models["head.bias"] += 1.0  # in place: same tensor, new version → rebuilt
    torch.testing.assert_close(fwd(models, x), before + 1.0, rtol=1e-5, atol=1e-5)
