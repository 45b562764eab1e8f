"""Counting the operators a block of PyTorch code dispatches: on an accelerator each operator that is not a view
is (at least) one kernel launch, so the count says on any machine, the CPU included, how many launches a step
takes. A test tool (not part of the package), used by the tests that keep the training step's launches flat and by
``benchmarks/speed/step_operators.py``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

# operators that only make a new view of a tensor's memory: no kernel runs
VIEWS = frozenset({"view", "_unsafe_view", "expand", "permute", "transpose", "slice", "select", "unsqueeze",
                   "squeeze", "t", "alias", "as_strided", "detach", "_reshape_alias", "split", "unbind"})


class OperatorCount(TorchDispatchMode):
    """``with OperatorCount() as ops: ...`` counts each dispatched operator by name in ``ops.counts``."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def launching(self) -> dict[str, int]:
        """The counts of the operators that are not views."""
        return {k: v for k, v in self.counts.items() if k not in VIEWS}
