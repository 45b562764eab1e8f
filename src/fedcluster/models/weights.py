"""``model.weights=PATH``: initial parameters from a local file, read without executing anything.

``.safetensors`` files are read with safetensors; anything else with ``torch.load(weights_only=True)``
(a plain state dict of tensors). Keys are the model's own parameter names (``body.*``, ``head.*``), as
``model.state_dict()`` writes them. Nothing is ever downloaded.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fedcluster.errors import ConfigError


def read_state(path: str | Path) -> dict[str, torch.Tensor]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"model.weights={str(p)!r} does not exist; give a local .safetensors or .pt state dict")
    try:
        if p.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(p))
        else:
            state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 — any unreadable file is the user's input problem
        raise ConfigError(f"model.weights={str(p)!r} is not a readable state dict ({type(e).__name__}); save one "
                          "with torch.save(model.state_dict(), PATH) or safetensors") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"model.weights={str(p)!r} must hold a dict of parameter name -> tensor")
    return state


def load_weights(model: nn.Module, path: str | Path) -> None:
    """Copy the file's tensors into ``model``; every parameter must be present with the same shape."""
    state = read_state(path)
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise ConfigError(f"model.weights={str(path)!r} does not fit this model: missing {missing[:3]}, "
                          f"unexpected {unexpected[:3]} (keys must be the model's body.*/head.* names)")
    for k, v in own.items():
        if state[k].shape != v.shape:
            raise ConfigError(f"model.weights={str(path)!r}: {k} has shape {list(state[k].shape)}, the model needs "
                              f"{list(v.shape)} (same dataset input shape and number of classes?)")
        if not torch.isfinite(state[k]).all():
            raise ConfigError(f"model.weights={str(path)!r}: {k} holds NaN or inf values")
    model.load_state_dict({k: state[k].to(v.dtype) for k, v in own.items()})
