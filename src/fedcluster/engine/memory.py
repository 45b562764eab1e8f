"""How many training units one vectorised call may hold: a memory budget divided by a per-unit estimate.

A unit's footprint in ``train_vectorized`` is its parameters a few times over (the stacked parameters,
their gradients, the momentum buffer and the proximal anchor, plus the step's temporaries) and the
activations of one batch kept for the backward pass. Activations are counted, not guessed: one forward
pass of the module on a single batch with hooks on its leaf modules sums their output sizes. The budget is
``chunk_mb`` when given, else a share of the device's free memory (``torch.cuda.mem_get_info``).
"""

from __future__ import annotations

import torch
from torch import nn

PARAM_COPIES = 5  # parameters, gradients, momentum, anchor, update temporaries
ACTIVATION_COPIES = 3  # saved activations, their gradients, vmap's temporaries
FREE_SHARE = 0.6  # of free accelerator memory, leaving room for the allocator and the evaluation


def unit_bytes(module: nn.Module, x: torch.Tensor, batch_size: int) -> int:
    """Estimated bytes one unit needs during a vectorised training step with ``batch_size`` samples."""
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    total = 0

    def count(_m: nn.Module, _inp: object, out: object) -> None:
        nonlocal total
        if isinstance(out, torch.Tensor):
            total += out.numel() * out.element_size()

    leaves = [m for m in module.modules() if next(m.children(), None) is None]
    hooks = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad():
            module(x[:1].to(dtype=torch.float32))
    finally:
        for h in hooks:
            h.remove()
    return PARAM_COPIES * params + ACTIVATION_COPIES * total * batch_size


def free_bytes(device: torch.device) -> int | None:
    """Free memory on an accelerator; None on the CPU (no budget: the caller keeps its default)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * FREE_SHARE)
    return None


def units_per_chunk(module: nn.Module, x: torch.Tensor, batch_size: int, device: torch.device,
                    budget: int | None = None, default: int = 256) -> int:
    """Units per vectorised call: ``budget`` bytes (or the free accelerator memory) over the per-unit
    estimate, at least one; ``default`` when there is neither a budget nor an accelerator."""
    budget = free_bytes(device) if budget is None else budget
    if budget is None:
        return default
    return max(1, budget // max(unit_bytes(module, x, batch_size), 1))
