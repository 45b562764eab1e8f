"""How many units one vectorised training call takes: ``max_units`` on the CPU, what ``chunk_mb`` allows when it is
set, and on an accelerator the memory plan of :mod:`fedcluster.engine.memory` (the state held for the call first,
the chunk from what is left), balanced over the calls a round takes."""

from __future__ import annotations

import torch
from torch import nn

from fedcluster.engine import memory
from fedcluster.engine.memory import (
    HELD_COPIES,
    MAX_UNITS,
    MemoryPlan,
    UnitFootprint,
    balanced_chunk,
    budget_bytes,
    chunk_units,
    footprint,
    unit_bytes,
)

OWN_CONCURRENCY = ("pool", "pool-vectorized", "dense", "sequential")  # paths that take a cohort in one call


class ChunkPlanner:
    """Units per call for ``module`` on inputs like ``x`` (a sample is measured once), on ``x``'s device."""

    def __init__(self, module: nn.Module, x: torch.Tensor, max_units: int = MAX_UNITS,
                 chunk_mb: float | None = None) -> None:
        self.module, self.x, self.device = module, x, x.device
        self.max_units, self.chunk_mb = max_units, chunk_mb
        self._chunk: dict[tuple[int, int | None, bool], int] = {}  # units per call, by (batch, units, streamed)
        self._footprint: UnitFootprint | None = None  # the module's per-unit bytes (engine.memory)

    def chunk_size(self, batch_size: int, units: int | None = None, streamed: bool = False) -> int:
        """Units per vectorised call: ``max_units`` on the CPU unless ``chunk_mb`` is set; with ``chunk_mb``, what fits
        it; on an accelerator the memory plan (engine.memory.MemoryPlan): the results and starts a call of ``units``
        units holds (none apart from the call's own when ``streamed``: folded into the aggregation call by call)
        first, the chunk from the rest of the available memory. Balanced over the calls a round takes; measured
        once per (batch size, units, streamed)."""
        key = (batch_size, units, streamed)
        if key not in self._chunk:
            mem = memory.device_memory(self.device) if self.chunk_mb is None else None
            if mem is None and self.chunk_mb is None:
                return self.max_units
            if self._footprint is None:
                self._footprint = footprint(self.module, tuple(self.x.shape[1:]), self.x[:1])
            fp = self._footprint
            assert fp is not None  # never None with a real sample to fall back on
            if mem is None:  # chunk_mb: the MiB one call may use
                fit = chunk_units(budget_bytes(self.device, self.chunk_mb) or 1, fp.step_bytes(batch_size))
                self._chunk[key] = fit if units is None else balanced_chunk(units, fit)
            else:
                count = max(units or 1, 1)
                held = 0 if streamed or units is None else count * HELD_COPIES * fp.params
                sample = self.x[:1].numel() * self.x.element_size()
                plan = MemoryPlan(mem.available, held, unit_bytes(fp, batch_size, sample, streamed),
                                  count if units is not None else MAX_UNITS)
                self._chunk[key] = plan.chunk if units is not None else plan.fit
        return self._chunk[key]

    def fold_size(self, path: str, batch_size: int, units: int, group: int) -> int:
        """Units per call of a folded training (the trained units added to the aggregation's sums call by call), a
        multiple of ``group``: the vectorised paths' chunk (streamed); the paths with their own concurrency
        (:data:`OWN_CONCURRENCY`) take the whole cohort in one call."""
        if path in OWN_CONCURRENCY or units <= group:
            return max(units, 1)
        groups = units // group
        fit = max(1, self.chunk_size(batch_size, units, streamed=True) // group)
        return (fit if self.device.type == "cpu" and self.chunk_mb is None else balanced_chunk(groups, fit)) * group
