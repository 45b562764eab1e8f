"""Features z = g(x; φ) of a stacked model's feature extractor (HCFL+ prototypes, HCFL paper eq. 11–12).

The bodies of a model stack (``body.*`` entries) run through
:class:`~fedcluster.engine.evaluation.inference.StackForward`, so convolutional extractors get the same traced,
inference-optimised forward as the E-step. A model whose body has no parameters (``logistic``, ``linear``: a
plain flatten) gives the flattened inputs.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedcluster.engine.evaluation import inference
from fedcluster.engine.evaluation.inference import StackForward
from fedcluster.engine.params import Params
from fedcluster.models.base import SplitModel

CHUNK = 4096  # rows gathered per pass


class _Body(nn.Module):
    """``forward = body``, with parameter names ``body.*`` as in a SplitModel's parameter set."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class BodyFeatures:
    """``__call__(models, position, x)`` → [N, d] features of ``x`` under the body of unit ``position``."""

    def __init__(self, module: SplitModel) -> None:
        self._forward = StackForward(_Body(module.body))

    @torch.no_grad()
    def __call__(self, models: Params, position: int, x: torch.Tensor) -> torch.Tensor:
        body = {n: v[position:position + 1] for n, v in models.items() if n.startswith("body.")}
        if not body:
            return x.reshape(len(x), -1)
        return self._forward(body, x)[0].reshape(len(x), -1)

    def cohort(self, models: Params, x: torch.Tensor, rows: np.ndarray, position: np.ndarray, shared: bool,
               chunk: int = CHUNK) -> torch.Tensor:
        """Features of the rows ``rows`` of ``x`` (gathered ``chunk`` at a time); row r uses the body of unit
        ``position[r]`` (one body for all when ``shared``). On an accelerator the bodies run vmapped, rows per
        call as the free memory allows."""
        body = {n: v.unsqueeze(1) for n, v in models.items() if n.startswith("body.")}
        if body and inference.row_budget(x.device) is not None:
            group = np.zeros(len(rows), np.int64) if shared else np.asarray(position, np.int64)
            z = self._forward.grouped(body, x, np.asarray(rows, np.int64), group)[0]
            return z.reshape(len(rows), -1)
        parts = []
        for i in range(0, len(rows), chunk):
            xb = x[torch.as_tensor(rows[i:i + chunk])]
            pos = position[i:i + chunk]
            if shared:
                parts.append(self(models, 0, xb))
                continue
            out: torch.Tensor | None = None
            for k in np.unique(pos):
                sel = torch.as_tensor(np.flatnonzero(pos == k))
                z = self(models, int(k), xb[sel])
                if out is None:
                    out = z.new_zeros((len(xb), z.shape[1]))
                out[sel] = z
            assert out is not None  # every chunk has rows
            parts.append(out)
        return torch.cat(parts) if parts else self(models, 0, x[:0])
