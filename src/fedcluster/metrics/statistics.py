"""Mean ± standard deviation over seeds (the sample standard deviation, ddof = 1, as papers report it)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean_sd(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean, sample standard deviation (0 for one value) and count of the finite ``values`` (NaN mean if none)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, 0
    mean = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    return mean, sd, n


def format_mean_sd(values: Sequence[float], spec: str = ".2f") -> str:
    """``"12.34 ± 0.56"`` over the finite values; ``"12.34"`` for one; ``"–"`` for none; notes missing seeds."""
    mean, sd, n = mean_sd(values)
    if n == 0:
        return "–"
    text = format(mean, spec) if n == 1 else f"{mean:{spec}} ± {sd:{spec}}"
    return text if n == len(values) else f"{text} ({n}/{len(values)} seeds)"
