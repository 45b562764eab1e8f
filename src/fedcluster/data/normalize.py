"""Input standardisation of image federations: x ← (x − mean_c) / sd_c per channel c.

The statistics are those of the pooled training inputs of every client (for Fashion-MNIST in [0, 1]:
mean 0.286, sd 0.353 over the 60k training images; FL-bench hard-codes (0.286, 0.320)), applied to the
training, validation and test splits alike, so every client and test client sees the same affine map.
Standardised inputs are what PyTorch/FL-bench users expect and what the papers' reference code
(Marfoq et al.'s FedEM code, the base of HCFL paper/FedRC paper) does; with inputs in [0, 1] plain SGD at small learning
rates starts much more slowly (measured in docs/fidelity.md).
"""

from __future__ import annotations

import torch

from fedcluster.data.federation import Federation


def channel_statistics(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and standard deviation of image inputs ``[n, C, ...]`` (float64), sd ≥ 1e-8."""
    flat = x.transpose(0, 1).reshape(x.shape[1], -1).double()
    return flat.mean(1), flat.std(1).clamp_min(1e-8)


def standardize(fed: Federation) -> Federation:
    """Standardise ``fed``'s inputs in place with its training statistics; records them in ``fed.info``."""
    if fed.train.x.dim() < 3 or len(fed.train.x) == 0:
        return fed
    mean, sd = channel_statistics(fed.train.x)
    return standardize_with(fed, {"mean": mean.tolist(), "std": sd.tolist()})


def standardize_with(fed: Federation, stats: dict[str, list[float]]) -> Federation:
    """Standardise the inputs ``fed`` holds in place with the statistics :func:`standardize` recorded (a
    process holding only some clients' inputs applies those of the whole federation)."""
    x = fed.train.local().x
    shape = (1, -1) + (1,) * (x.dim() - 2)
    m = torch.as_tensor(stats["mean"], dtype=torch.float64).float().view(shape)
    s = torch.as_tensor(stats["std"], dtype=torch.float64).float().view(shape)
    for split in (fed.train, fed.val, fed.test):
        split.set_inputs((split.local().x - m.to(x.device)) / s.to(x.device))
    fed.info["normalization"] = stats
    return fed


def destandardize(x: torch.Tensor, stats: dict[str, list[float]] | None) -> torch.Tensor:
    """The raw inputs behind standardised ``x`` ``[n, C, ...]``: x·sd_c + mean_c with the statistics
    :func:`standardize` recorded in ``fed.info["normalization"]``; ``x`` itself when ``stats`` is None (the
    federation was not standardised). For methods whose statistic is defined on the data as stored, e.g.
    PACFL's subspaces (not invariant to the shift by mean_c)."""
    if stats is None:
        return x
    shape = (1, -1) + (1,) * (x.dim() - 2)
    mean = torch.as_tensor(stats["mean"], dtype=x.dtype, device=x.device).view(shape)
    sd = torch.as_tensor(stats["std"], dtype=x.dtype, device=x.device).view(shape)
    return x * sd + mean
