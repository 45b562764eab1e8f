"""Which trained units came back non-finite: recorded on the device during the round, read once by the runner's
divergence check (engine.divergence), so that training adds no host sync to a round. Methods never see it."""

from __future__ import annotations

import numpy as np
import torch

from fedcluster.engine.params import Params


class NonFiniteWatch:
    """Each training call's per-unit largest absolute entry, kept until :meth:`take`; a trainer's siblings share
    their parent's watch (one list for the round)."""

    def __init__(self) -> None:
        self.pending: list[tuple[np.ndarray, torch.Tensor]] = []

    def record(self, out: Params, clients: np.ndarray) -> None:
        """Remember each unit's largest absolute entry (NaN or inf exactly when one of its entries is; min/max
        reductions allocate no stack-sized temporary and cannot overflow), kept on the device."""
        if len(clients) == 0 or next(iter(out.values())).device.type == "meta":  # meta: shapes only, no values
            return
        peaks = []
        for v in out.values():
            if not v[0].numel():
                continue
            if v.device.type == "cpu":  # whole-tensor reductions unit by unit: ~10x the CPU's per-row kernel
                low, high = (torch.stack(t) for t in zip(*(torch.aminmax(unit) for unit in v), strict=True))
            else:
                low, high = torch.aminmax(v.reshape(len(clients), -1), dim=1)
            peaks.append(torch.maximum(high, -low))
        if peaks:
            self.pending.append((np.asarray(clients), torch.stack(peaks).amax(0)))

    def take(self) -> list[tuple[np.ndarray, torch.Tensor]]:
        """The (clients, per-unit largest absolute entry) pairs recorded since the last call."""
        out = list(self.pending)
        self.pending.clear()
        return out

    def take_nonfinite(self) -> list[int]:
        """The clients whose units came back non-finite since the last call, sorted (one host read)."""
        watched = self.take()
        if not watched:
            return []
        finite = torch.isfinite(torch.cat([s for _, s in watched])).cpu().numpy()
        clients = np.concatenate([c for c, _ in watched])
        return sorted({int(c) for c in clients[~finite]})
