"""Diverse distribution shift benchmarks: label + feature + concept shift at once.

* ``diverse-shift`` — FedRC (FedRC paper) §5.1 / App. H.8: LDA α = 1.0; 30% clean clients, 20%
  corrupted, 25% per extra concept (a fifth of those corrupted); every corrupted client draws one of
  the 19 corruptions and a severity in 1..5; FedRC's label maps; one non-participating test client per
  concept built from the official test set. ``assignment=uniform`` gives FedRC paper §3's variant (Fig. 2 /
  Fig. 6): every client draws one of the 20 styles (incl. "original") and one concept uniformly;
  ``assignment=fedrc-code`` the FedRC paper's public code's mix (concepts 40 / 30 / 30 %, 40 % corrupted).
* ``hcfl-shift`` — HCFL (HCFL paper) §5.1 / App. E.1–E.2: the same uniform per-client style and
  concept draw with the HCFL paper's β concept rule.

``family`` picks the corruption family of both: ``cifar-c`` (default; the 19 CIFAR-10-C corruptions scaled to
the image size, :mod:`fedcluster.data.shifts.corruptions`) or ``mnist-c`` (Mu & Gilmer's MNIST-C family as FedRC's
Fashion-MNIST-C uses it, grey images only, :mod:`fedcluster.data.shifts.mnist_c`).

Ground truth: ``true_cluster`` = concept, ``style`` = index into ``style_names`` (the family's style names,
"original" / "identity" = 0), ``extras["severity"]`` (0 for the clean style), ``extras["label_maps"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fedcluster.catalog.registry import SCENARIOS
from fedcluster.data.assemble import ClientPlan, Transform, assemble
from fedcluster.data.federation import Federation
from fedcluster.data.host_memory import available_bytes, format_bytes
from fedcluster.data.scenarios.common import (
    NoiseKind,
    SplitKind,
    add_label_noise,
    check_data,
    check_noise_rate,
    check_ratios,
    full_test,
    label_maps,
    partition,
    scenario_info,
)
from fedcluster.data.scenarios.shared_params import LabelSplit, Validation
from fedcluster.data.shifts.assignment import (
    diverse_shift_assignment,
    fedrc_code_assignment,
    ratio_assignment,
    uniform_assignment,
)
from fedcluster.data.shifts.corruptions import CORRUPTIONS, SEVERITIES, corrupt
from fedcluster.data.shifts.mnist_c import MNIST_C, corrupt_mnist_c
from fedcluster.data.sources.base import ArrayDataset
from fedcluster.errors import ResourceError

STYLE_NAMES: list[str] = list(CORRUPTIONS)  # style id = index; 0 = "original" (family cifar-c)
Family = Literal["cifar-c", "mnist-c"]
Corrupt = Callable[[np.ndarray, str, int, np.random.Generator], np.ndarray]
FAMILIES: dict[str, tuple[tuple[str, ...], Corrupt]] = {"cifar-c": (CORRUPTIONS, corrupt),
                                                        "mnist-c": (MNIST_C, corrupt_mnist_c)}


def _check_styles(styles: Sequence[str] | None, severities: Sequence[int], family: str = "cifar-c") -> None:
    if family not in FAMILIES:
        raise ValueError(f"unknown corruption family {family!r}; valid: {', '.join(FAMILIES)}")
    names = FAMILIES[family][0]
    if styles is not None:
        bad = [s for s in styles if s not in names]
        if bad or not styles:
            raise ValueError(f"unknown corruption styles {bad} in family {family}; valid: {', '.join(names)}")
    if not severities or any(s not in SEVERITIES for s in severities):
        raise ValueError(f"severities must be a non-empty list drawn from {list(SEVERITIES)}, got {severities}")


def _corruptor(style: str, severity: int, fn: Corrupt = corrupt) -> Transform:
    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return fn(x, style, severity, rng)

    return apply


def _balanced_styles(styles: Sequence[str], severities: Sequence[int], fn: Corrupt = corrupt) -> Transform:
    """Test-set feature balance (FedRC paper Fig. 2 reading): equal shares of every style, random severity."""

    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(x.shape, dtype=np.float32)
        for chunk, style in zip(np.array_split(rng.permutation(len(x)), len(styles)), styles, strict=True):
            out[chunk] = fn(x[chunk], style, int(rng.choice(severities)), rng)
        return out

    return apply


def _build(
    name: str, data: ArrayDataset, num_clients: int, params: DiverseShiftParams | HCFLShiftParams,
    concept: np.ndarray, style: np.ndarray, maps: np.ndarray, rng: np.random.Generator,
) -> Federation:
    """Partition (optionally replicated) training data, attach concept maps and style corruptions, assemble."""
    names, fn = FAMILIES[params.family]
    if params.family == "mnist-c" and data.x_train.shape[1] != 1:
        raise ValueError(f"family=mnist-c corrupts grey images; {data.name} has {data.x_train.shape[1]} channels "
                         "(use family=cifar-c)")
    n = len(data.y_train)
    check_replicas_fit(data, params.replicate)
    pool = np.tile(data.y_train, params.replicate)  # FedRC paper: CIFAR training set replicated 3× for 300 clients
    parts = partition(pool, num_clients, params.split, params.alpha, params.classes_per_client, rng)
    severity = np.where(style > 0, rng.choice(params.severities, size=num_clients), 0).astype(np.int64)
    clients = [
        ClientPlan(p % n, int(c), maps[c], _corruptor(names[s], int(v), fn) if s > 0 else None, int(s))
        for p, c, s, v in zip(parts, concept, style, severity, strict=True)
    ]
    test_styles = params.styles or list(names)
    transform = _balanced_styles(test_styles, params.severities, fn) if params.corrupt_test else None
    tests = [full_test(data, c, maps[c], transform, -1 if params.corrupt_test else 0) for c in range(len(maps))]
    fed = assemble(data, clients, tests, params.val_fraction, rng, scenario_info(name, data, params), list(names))
    fed.extras.update(label_maps=maps, severity=severity)
    add_label_noise(fed, params.noise, params.noise_rate, rng)
    return fed


def check_replicas_fit(data: ArrayDataset, replicate: int) -> None:
    """Refuse ``replicate`` copies of the training set that would not fit in the available memory: every copy
    becomes training samples (inputs, labels and their index), held about twice while the clients are assembled."""
    per_sample = data.x_train[:1].nbytes + 16
    need = 2 * replicate * len(data.y_train) * per_sample
    free = available_bytes()
    if free is not None and need > free:
        fits = max(1, free // max(1, 2 * len(data.y_train) * per_sample))
        raise ResourceError(f"scenario.replicate={replicate} copies of the training set need about "
                            f"{format_bytes(need)} but only {format_bytes(free)} is available; use at most "
                            f"scenario.replicate={fits}")


@dataclass
class _StyledConceptParams(Validation, LabelSplit):
    """What diverse-shift and hcfl-shift share: label split, styles, concepts, replication, noise."""

    split: SplitKind = "dirichlet-global"
    concepts: int = 3  # number of concepts (label maps)
    ratios: list[float] | None = None  # clients per concept in this ratio (assignment=uniform; null = equal)
    styles: list[str] | None = None  # corruptions to draw from (null = all of the family)
    family: Family = "cifar-c"  # corruption family: cifar-c (CIFAR-10-C, 19 + original) or mnist-c (MNIST-C)
    severities: list[int] = field(default_factory=lambda: list(SEVERITIES))  # corruption severities to draw from
    replicate: int = 1  # copies of the training set before splitting
    corrupt_test: bool = False  # mix the styles into the test clients (default: clean test set)
    noise: NoiseKind = "none"  # label noise on training labels: none, symmetric or pair
    noise_rate: float = 0.2  # χ, the share of flipped training labels

    def check(self) -> None:
        check_noise_rate(self.noise_rate)
        _check_styles(self.styles, self.severities, self.family)
        if self.concepts < 1:
            raise ValueError(f"concepts must be >= 1, got {self.concepts}")
        if self.replicate < 1:
            raise ValueError(f"replicate must be >= 1, got {self.replicate}")
        check_ratios(self.ratios, self.concepts)


@dataclass
class DiverseShiftParams(_StyledConceptParams):
    """FedRC paper App. H.8 (``assignment=proportions``) or FedRC paper §3 (``assignment=uniform``; ``ratios`` then
    fixes the clients per concept, e.g. [8,1,1] for FedRC paper Fig. 6b). ``family``: cifar-c (default) or mnist-c
    (FedRC's Fashion-MNIST-C). ``styles``: the corruptions of the family to draw from (default: all but the clean
    one for corrupted clients, all incl. the clean one under ``uniform``). ``replicate``: copies of the
    training set before splitting (FedRC paper: 3 for CIFAR with 300 clients). ``corrupt_test``: mix the 20 styles
    evenly into the test clients (default: clean official test set). ``noise``: label noise
    on training labels at ``noise_rate`` (FedRC paper Table 13). ``split``/``alpha``/``classes_per_client``: the label
    shift as in ``label-skew``; the default is the FedRC code's LDA (Dir(α·p_global), equal client sizes)."""

    assignment: Literal["proportions", "uniform", "fedrc-code"] = "proportions"  # H.8 mix / §3 draws / the code's mix

    def check(self) -> None:
        if self.assignment == "fedrc-code" and self.concepts != 3:
            raise ValueError(f"assignment=fedrc-code is the FedRC code's 3-concept mix; got concepts={self.concepts}")
        if self.ratios is not None and self.assignment != "uniform":
            raise ValueError("ratios needs assignment=uniform (assignment=proportions and fedrc-code fix their "
                             "mixes)")


@SCENARIOS.register("diverse-shift", "FedRC benchmark (FedRC paper H.8): LDA + 30% clean / 20% corrupted / 25% per "
                    "swapped concept (1/5 corrupted); assignment=uniform for FedRC paper §3", DiverseShiftParams)
def diverse_shift(data: ArrayDataset | None, num_clients: int, params: DiverseShiftParams,
                  rng: np.random.Generator) -> Federation:
    data = check_data(data, "diverse-shift")
    maps = label_maps("fedrc", data.num_classes, params.concepts)
    if params.assignment in ("proportions", "fedrc-code"):
        concept, corrupted = (diverse_shift_assignment(num_clients, rng, params.concepts)
                              if params.assignment == "proportions" else fedrc_code_assignment(num_clients, rng))
        names = FAMILIES[params.family][0]
        pool = [names.index(s) for s in (params.styles or names[1:])]
        style = np.where(corrupted, rng.choice(pool, size=num_clients), 0)
    else:
        concept, style = _uniform_draw(num_clients, params, rng)
    return _build("diverse-shift", data, num_clients, params, concept, style, maps, rng)


def _uniform_draw(num_clients: int, params: DiverseShiftParams | HCFLShiftParams, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray]:
    """FedRC paper §3: concept and style drawn uniformly and independently per client (``ratios``: exact counts)."""
    if params.ratios is None:
        concept = uniform_assignment(num_clients, params.concepts, rng)
    else:
        concept = ratio_assignment(num_clients, params.ratios, rng)
    names = FAMILIES[params.family][0]
    pool = np.array([names.index(s) for s in (params.styles or names)])
    return concept, pool[uniform_assignment(num_clients, len(pool), rng)]


@dataclass
class HCFLShiftParams(_StyledConceptParams):
    """HCFL paper §5.1 / App. E.1: LDA α, one of 20 styles (incl. "original", severity 1..5) and one of ``concepts``
    β-rule concepts per client, drawn uniformly (HCFL paper defers to FedRC paper §3; ``ratios`` fixes the concept
    counts).
    β: HCFL paper Table 1 uses 0.2, Table 5 0.4. ``noise``/``noise_rate``: HCFL paper Table 4 (χ ∈ {0.1, 0.2} pair,
    {0.2, 0.4} symmetric). ``split=classes`` with ``classes_per_client`` gives HCFL paper Tables 11–13 ("C = 2 / 4")."""

    beta: float = 0.2  # β of the HCFL paper's label-map rule (Table 1: 0.2, Table 5: 0.4)

    def check(self) -> None:
        if not 0 <= self.beta <= 1:
            raise ValueError(f"beta must be in [0, 1], got {self.beta}")


@SCENARIOS.register("hcfl-shift", "HCFL benchmark (HCFL paper §5.1): LDA + one of 20 styles + one of 3 β-rule "
                    "concepts per client (uniform draws)", HCFLShiftParams)
def hcfl_shift(data: ArrayDataset | None, num_clients: int, params: HCFLShiftParams,
               rng: np.random.Generator) -> Federation:
    data = check_data(data, "hcfl-shift")
    maps = label_maps("hcfl-beta", data.num_classes, params.concepts, beta=params.beta)
    concept, style = _uniform_draw(num_clients, params, rng)
    return _build("hcfl-shift", data, num_clients, params, concept, style, maps, rng)
