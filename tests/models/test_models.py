"""Model zoo: shapes, the body/head split and known parameter counts."""

from __future__ import annotations

import pytest
import torch

from fedcluster.errors import ConfigError
from fedcluster.models import build_model


def _count(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_fedavg_cnn_has_the_papers_parameter_count() -> None:
    # McMahan et al. 2017: the MNIST CNN has 1,663,370 parameters.
    assert _count(build_model("cnn", (1, 28, 28), 10)) == 1_663_370


def test_mlp_784_200_10() -> None:
    assert _count(build_model("mlp", (1, 28, 28), 10)) == 784 * 200 + 200 + 200 * 10 + 10


@pytest.mark.parametrize("name", ["logistic", "mlp", "cnn", "light-cnn"])
@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (1, 8, 8)])
@pytest.mark.host_only(reason="model and input built by the test on the host, called there")
def test_forward_shapes_and_split(name: str, shape) -> None:
    m = build_model(name, shape, 7)
    x = torch.rand(5, *shape)
    assert m(x).shape == (5, 7)
    torch.testing.assert_close(m.head(m.features(x)), m(x))
    assert all(n.startswith(("body.", "head.")) for n, _ in m.named_parameters())
    assert any(n.startswith("head.") for n, _ in m.named_parameters())


def test_cnn_rejects_flat_inputs_and_bad_params() -> None:
    with pytest.raises(ConfigError, match="image inputs"):
        build_model("cnn", (100,), 1)
    with pytest.raises(ConfigError, match="model.channels"):
        build_model("cnn", (1, 28, 28), 10, {"channels": [1, 2, 3]})
