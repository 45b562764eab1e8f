"""ResNet-18 and MobileNet-V2 (CIFAR stems, GroupNorm): sizes, the body/head split, local weight files,
and a training step that agrees between the vectorised and the sequential path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.errors import ConfigError
from fedcluster.models import build_model

NAMES = ["resnet18", "mobilenet-v2"]

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


def _count(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_parameter_counts_match_the_usual_cifar_networks() -> None:
    # torchvision-style CIFAR ResNet-18 (BatchNorm affine = GroupNorm affine): 11,173,962 for 10 classes
    assert _count(build_model("resnet18", (3, 32, 32), 10)) == 11_173_962
    assert _count(build_model("mobilenet-v2", (3, 32, 32), 10)) == 2_236_682


@HOST_ONLY
@pytest.mark.parametrize("name,features", [("resnet18", 512), ("mobilenet-v2", 1280)])
@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 28, 28)])
def test_shapes_and_split(name: str, features: int, shape) -> None:
    m = build_model(name, shape, 7).eval()
    x = torch.rand(2, *shape)
    assert m.body(x).shape == (2, features)
    assert m(x).shape == (2, 7)
    assert isinstance(m.head, torch.nn.Linear) and m.head.in_features == features
    assert all(n.startswith(("body.", "head.")) for n, _ in m.named_parameters())
    assert not any(isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) for mod in m.modules())
    assert not list(m.buffers())  # no running statistics: a model is its parameters


def test_needs_images() -> None:
    with pytest.raises(ConfigError, match="image inputs"):
        build_model("resnet18", (784,), 10)


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_weights_round_trip(tmp_path, suffix: str) -> None:
    torch.manual_seed(0)
    src = build_model("mobilenet-v2", (3, 16, 16), 5)
    path = tmp_path / f"w{suffix}"
    state = {k: v.contiguous() for k, v in src.state_dict().items()}
    save_file(state, str(path)) if suffix == ".safetensors" else torch.save(state, path)
    torch.manual_seed(1)
    loaded = build_model("mobilenet-v2", (3, 16, 16), 5, {"weights": str(path)})
    fresh = build_model("mobilenet-v2", (3, 16, 16), 5)
    for k, v in src.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[k], v, rtol=0, atol=0)
    assert not torch.equal(fresh.head.weight, src.head.weight)


def test_weights_errors_are_one_line(tmp_path) -> None:
    path = tmp_path / "w.pt"
    torch.save(build_model("resnet18", (3, 16, 16), 5).state_dict(), path)
    with pytest.raises(ConfigError, match=r"head.weight has shape \[5, 512\], the model needs \[10, 512\]"):
        build_model("resnet18", (3, 16, 16), 10, {"weights": str(path)})
    with pytest.raises(ConfigError, match="does not fit this model"):
        build_model("mobilenet-v2", (3, 16, 16), 5, {"weights": str(path)})
    with pytest.raises(ConfigError, match="does not exist"):
        build_model("resnet18", (3, 16, 16), 5, {"weights": str(tmp_path / "nope.pt")})
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="not a readable state dict"):
        build_model("resnet18", (3, 16, 16), 5, {"weights": str(tmp_path / "bad.pt")})


@pytest.fixture
def one_thread():
    """Big convolutions on tiny inputs: intra-op threads only add contention on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _tiny_round(name: str, paths: tuple[str, ...]) -> tuple[dict, dict]:
    sizes = [4, 2]
    g = torch.Generator().manual_seed(0)
    x = torch.rand(sum(sizes), 3, 8, 8, generator=g)
    y = torch.randint(0, 4, (sum(sizes),), generator=g)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    torch.manual_seed(0)
    module = build_model(name, (3, 8, 8), 4)
    init = stack([get_params(module), get_params(module)])
    solver = Solver(lr=0.05, batch_size=4, momentum=0.9)
    out = {}
    for path in paths:
        tr = LocalTrainer(module, x, y, ptr, "classification", seed=0, path=path)
        out[path] = tr.train(init, np.array([0, 1]), solver, 0, weights=[np.ones(4), np.linspace(0, 1, 2)])
    return init, out


@HOST_ONLY
@pytest.mark.parametrize("name", NAMES)
def test_one_tiny_round_trains_every_parameter(name: str, one_thread) -> None:
    init, out = _tiny_round(name, ("sequential",))
    for k, v in init.items():
        assert torch.isfinite(out["sequential"][k]).all()
        assert not torch.equal(out["sequential"][k][0], v[0]), k  # gradients reach the whole body


@HOST_ONLY
@pytest.mark.slow  # vmap over 11M-parameter stacks: ~40 s on a busy 2-core CPU
@pytest.mark.parametrize("name", NAMES)
def test_one_tiny_round_vectorized_equals_sequential(name: str, one_thread) -> None:
    init, out = _tiny_round(name, ("sequential", "vectorized"))
    for k in init:
        torch.testing.assert_close(out["vectorized"][k], out["sequential"][k], rtol=1e-4, atol=1e-5)
