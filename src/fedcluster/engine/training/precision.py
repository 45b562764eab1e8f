"""Numeric precision of local training: fp32, or bfloat16 autocast around forward/backward."""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("fp32", "bf16")


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bfloat16 autocast for ``precision="bf16"`` (forward/backward only; parameters stay fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
