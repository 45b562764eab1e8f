"""Synthetic scenarios wrapping the generators of :mod:`fedcluster.data.sources.synthetic`.

* ``mixed-regression`` (FedMD paper §V-A..C): ``config`` = A, B or C sets the population; any of
  ``k``, ``d``, ``sizes``, ``p``, ``noise`` given explicitly overrides the configuration's value.
  ``config=custom`` uses ``num_clients`` clients of 50 samples (unless ``sizes`` is given). A named
  configuration fixes the number of clients, so ``num_clients`` is then ignored (the run adopts the
  federation's count).
* ``cflgp-lines`` (CFL-GP paper §5.1 / App. F.4): ``num_clients`` clients split equally over the three
  lines at angles (Δφ, 0, −Δφ) (the CFL-GP paper's default population is 12).

Both draw their generator seed from the scenario's data-seeded ``rng``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.federation import Federation
from fedcluster.data.shifts.assignment import balanced_assignment
from fedcluster.data.sources.base import ArrayDataset
from fedcluster.data.sources.synthetic import (
    MIXED_REGRESSION_CONFIGS,
    cflgp_lines,
    mixed_regression,
    mixed_regression_config,
    parse_sizes,
)


def _synthetic_only(data: ArrayDataset | None, name: str) -> None:
    if data is not None:
        raise ValueError(f"scenario {name!r} generates its own data: use dataset={name}")


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


@dataclass
class MixedRegressionParams:
    """FedMD paper configurations A (200 × 50, p uniform), B (900 × 10 + 20 × 50, p uniform), C (as B, p = 0.2/0.3/0.5);
    k = 3, d = 100, noise 0.2 in all. ``sizes``: list or "10x900+50x20"."""

    config: str = "A"  # FedMD paper configuration A, B or C (or custom with the keys below)
    k: int | None = None  # clusters (null = the configuration's)
    d: int | None = None  # feature dimension (null = config's)
    sizes: list[int] | str | None = None  # samples per client, a list or "10x900+50x20" (null = config's)
    p: list[float] | None = None  # cluster probabilities (null = config's)
    noise: float | None = None  # noise std (null = config's)
    val_fraction: float = 0.2  # validation draw per client, a fraction of n_i
    min_val: int = 10  # at least this many validation samples per client
    test_size: int = 1000  # samples per test client

    def __post_init__(self) -> None:
        self.config = self.config.strip().upper() if self.config.strip().lower() != "custom" else "custom"
        if self.config != "custom" and self.config not in MIXED_REGRESSION_CONFIGS:
            raise ValueError(f"config must be one of {', '.join(sorted(MIXED_REGRESSION_CONFIGS))} or custom, "
                             f"got {self.config!r}")
        if self.sizes is not None:
            parse_sizes(self.sizes)
        if self.k is not None and self.k < 1 or self.d is not None and self.d < 1:
            raise ValueError(f"k and d must be >= 1, got k={self.k}, d={self.d}")
        if self.noise is not None and self.noise < 0:
            raise ValueError(f"noise must be >= 0, got {self.noise}")
        if not 0 <= self.val_fraction <= 1 or self.min_val < 0 or self.test_size < 1:
            raise ValueError("need 0 <= val_fraction <= 1, min_val >= 0 and test_size >= 1")

    def generator_kwargs(self, num_clients: int) -> dict[str, Any]:
        base: dict[str, Any] = (
            {"k": 3, "d": 100, "sizes": f"50x{num_clients}", "p": None, "noise": 0.2}
            if self.config == "custom" else mixed_regression_config(self.config)
        )
        base.pop("name", None)
        for key in ("k", "d", "sizes", "p", "noise"):
            if getattr(self, key) is not None:
                base[key] = getattr(self, key)
        if base["p"] is not None and len(base["p"]) != base["k"] and self.p is None:
            base["p"] = None  # k overridden: the configuration's p no longer fits, fall back to uniform
        return {**base, "val_fraction": self.val_fraction, "min_val": self.min_val, "test_size": self.test_size}

    size_knobs = "scenario.sizes, scenario.d or scenario.test_size"

    def estimated_bytes(self, num_clients: int) -> int:
        """Peak bytes of generating the federation: float64 draws of x and y plus their float32 copies."""
        kw = self.generator_kwargs(num_clients)
        n = np.asarray(parse_sizes(kw["sizes"]), dtype=np.float64)
        val = np.maximum(self.min_val, np.ceil(self.val_fraction * n))
        samples = n.sum() + val.sum() + kw["k"] * self.test_size
        return int(samples * (kw["d"] + 1) * 12 + n.size * 64)


@SCENARIOS.register("mixed-regression", "FedMD paper mixed linear regression (config=A|B|C|custom; k, d, sizes, p, "
                    "noise override)", MixedRegressionParams)
def mixed_regression_scenario(data: ArrayDataset | None, num_clients: int, params: MixedRegressionParams,
                              rng: np.random.Generator) -> Federation:
    _synthetic_only(data, "mixed-regression")
    fed = mixed_regression(**params.generator_kwargs(num_clients), seed=_seed(rng), name="mixed-regression")
    fed.info.update(dataset="mixed-regression", config=params.config)
    return fed


@dataclass
class CFLGPLinesParams:
    """CFL-GP paper §5.1 defaults: Δφ = 20° (Fig. 9: 10/20/40), minibatch b = 10, noise std 0.2. ``pool_size``: samples
    per client (2,000 = T·b); each round's minibatch is drawn at random from the pool, so samples can repeat
    across rounds (see :func:`cflgp_lines`). The CFL-GP paper's init: ``model=linear model.init_range=0.8``."""

    delta_phi: float = 20.0  # Δφ, degrees between the lines
    batch: int = 10  # b, the minibatch drawn per round
    noise_std: float = 0.2  # label noise standard deviation
    pool_size: int = 2000  # samples per client
    val_size: int = 200  # validation samples per client
    test_size: int = 1000  # samples per test client

    def __post_init__(self) -> None:
        if not 0 <= self.delta_phi < 90:
            raise ValueError(f"delta_phi must be in [0, 90) degrees, got {self.delta_phi}")
        if self.noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {self.noise_std}")
        if self.pool_size < 1 or self.val_size < 0 or self.test_size < 1 or not 1 <= self.batch <= self.pool_size:
            raise ValueError("need 1 <= batch <= pool_size, val_size >= 0 and test_size >= 1")

    size_knobs = "num_clients, scenario.pool_size, scenario.val_size or scenario.test_size"

    def estimated_bytes(self, num_clients: int) -> int:
        """Peak bytes of generating the federation: float64 draws of x and y plus their float32 copies."""
        samples = num_clients * (self.pool_size + self.val_size) + 3 * self.test_size
        return samples * 2 * 12 + num_clients * 64


@SCENARIOS.register("cflgp-lines", "CFL-GP paper §5.1 three noisy lines at angles (Δφ, 0, −Δφ), clients split equally",
                    CFLGPLinesParams)
def cflgp_lines_scenario(data: ArrayDataset | None, num_clients: int, params: CFLGPLinesParams,
                         rng: np.random.Generator) -> Federation:
    _synthetic_only(data, "cflgp-lines")
    assignment = balanced_assignment(num_clients, 3, rng)  # shuffled, so client index carries no cluster info
    fed = cflgp_lines(
        num_clients, params.delta_phi, params.batch, params.noise_std, params.pool_size, params.val_size,
        params.test_size, assignment=assignment.tolist(), seed=_seed(rng), name="cflgp-lines",
    )
    fed.info.update(dataset="cflgp-lines")
    return fed
