"""Host data to the device without making the host wait.

``torch.as_tensor(array, device=cuda)`` and ``tensor.to(cuda)`` copy and then synchronise the stream: the host
waits for every kernel queued before the copy. Round data built on the host (schedules, per-sample weights,
aggregation weights, row indices) need not wait: :func:`to_device` queues the copy (``non_blocking=True``; CUDA
stages pageable memory at once, so the source may be freed right after) and returns. On the CPU it is
``torch.as_tensor``.
"""

from __future__ import annotations

from typing import Any

import torch


def to_device(data: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``data`` (an array, a host tensor or numbers) as a tensor on ``device``, copied without a host sync."""
    return torch.as_tensor(data, dtype=dtype).to(device, non_blocking=True)


def state_to_device(state: Any, device: torch.device) -> Any:
    """A (checkpointed) algorithm state with its tensors on ``device``: dicts, lists and tuples walked, other values
    kept (checkpoints are written from the CPU)."""
    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {k: state_to_device(v, device) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(state_to_device(v, device) for v in state)
    return state
