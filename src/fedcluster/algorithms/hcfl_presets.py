"""Named methods as presets of the HCFL composition (``algorithm=hcfl``): each maps its few parameters onto
:class:`~fedcluster.algorithms.hcfl.HCFLParams` and runs the same :class:`~fedcluster.algorithms.hcfl.HCFL`.

* ``hcfl-plus`` — HCFL+ (HCFL paper Sec. 4, Alg. 2–5) with ``backbone`` for tiers 1–2:
  ``fesem`` = conditional + hard-distance (E.1-25: argmin over the heads), ``fedem`` = conditional + sample-wise
  soft EM with μ̃ = 0 (E.1-12), ``fedrc`` = fedrc-ratio + sample-wise soft EM with μ̃ = 0.4, ``fedsoft`` = HCFL+(FedEM)
  with FedSoft's proximal local updates (A.2 "Variants"); shared extractor + heads; split-remove with eq. 8 on
  prototype distances, CSCP for FedRC and ASCP otherwise (E.1-24), K^0 = 1 (E.1-13). The HCFL paper's ablations are
  parameters: ``scwu=false`` (Table 7), ``distance=update-cosine`` (Table 2 ①: gradient similarity),
  ``confidence=false`` (②), ``reduce=mean`` (③).
* ``hcfl-prime`` — HCFL' (HCFL paper Table 10): the backbone for tiers 1–2, CFL for tiers 3–4 (tol1/tol2 split test on
  update cosine, hard re-assignment of the parts, no removal), plus the extractor/head split and eq. 4–7.
* ``fedrc-adaptive`` — adaptive FedRC (FedRC paper App. F / H.4 Alg. 3): FedRC with K^0 = 6 full models, models whose
  mass (1/N) Σ γ_{i,j;k} falls below δ = 0.05 are removed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.hcfl import HCFL, HCFLParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import RangeChecked, ranged
from fedcluster.tiers.distance import Reduce

Backbone = Literal["fesem", "fedem", "fedrc", "fedsoft"]


def backbone_tiers(backbone: str, mu_tilde: float | None, prox: float) -> dict[str, object]:
    """Tier-1/2 choices of a backbone (HCFL paper Sec. 5 / "Variants", E.1-12, E.1-25)."""
    if backbone == "fesem":
        return {"formulation": "conditional", "weights": "hard-distance", "weights_scope": "client", "mu_tilde": 0.0}
    default_mu = 0.4 if backbone == "fedrc" else 0.0
    tiers: dict[str, object] = {"formulation": "fedrc-ratio" if backbone == "fedrc" else "conditional",
                                "weights": "soft-em", "weights_scope": "sample",
                                "mu_tilde": default_mu if mu_tilde is None else mu_tilde}
    if backbone == "fedsoft":
        tiers["prox"] = prox
    return tiers


@dataclass
class HCFLPlusParams(RangeChecked):
    backbone: Backbone = "fedrc"  # tiers 1–2 of fesem, fedem, fedrc or fedsoft
    num_clusters: int = ranged(1, ">= 1")  # K^0, the clusters at the start
    rho: float = 0.3  # eq. 8 (HCFL paper: 0.05, 0.1, 0.3)
    principle: Literal["auto", "ascp", "cscp"] = "auto"  # auto: CSCP for FedRC, ASCP otherwise (our reading)
    distance: Literal["prototype", "update-cosine"] = "prototype"  # update-cosine: Table 2 ablation ①
    prototypes: Literal["features", "head-update"] = "features"  # head-update: the HCFL paper's public code's rows
    confidence: bool = True  # Table 2 ablation ②: false drops the ω̃ factors of eq. 9
    reduce: Reduce = "max"  # Table 2 ablation ③: mean
    scwu: bool = True  # Table 7 ablation: false = hard re-assignment after a split
    adaptive: Literal["split-remove", "split"] = "split-remove"  # split-remove (HCFL+) or split only
    mu_tilde: float | None = None  # default per backbone: 0.4 FedRC, 0 otherwise (our reading of the paper)
    prox: float = 0.1  # backbone=fedsoft: the proximal weight
    include_diagonal: bool = True  # mean(D_k) over the whole matrix (reference code) or off-diagonal only
    strict: bool = False  # ">" ρ (reference code) instead of eq. 8's "≥"
    warmup: int = 0  # no split before this round
    max_clusters: int | None = None  # never split beyond this many clusters (null = no cap)
    test_em_iters: int = 10  # E-steps a non-participating client runs on its labelled data

    def __post_init__(self) -> None:
        super().__post_init__()
        to_hcfl(self)  # validates the composed values


@dataclass
class HCFLPrimeParams(RangeChecked):
    backbone: Backbone = "fedrc"  # tiers 1–2 of fesem, fedem, fedrc or fedsoft
    num_clusters: int = ranged(1, ">= 1")  # K^0
    tol1: float = 0.4  # HCFL paper Table 1 CFL settings: (0.4, 1.6), (0.4, 0.8), (0.2, 0.8)
    tol2: float = 1.6  # ε2 of CFL's split test
    warmup: int = 20  # Sattler's code splits from round 20 on
    min_size: int = 3  # split only clusters with at least this many sampled members
    max_clusters: int | None = None  # cap on K (null = none)
    mu_tilde: float | None = None  # default per backbone: 0.4 FedRC, 0 otherwise
    prox: float = 0.1  # backbone=fedsoft: the proximal weight
    test_em_iters: int = 10  # E-steps a non-participating client runs on its labelled data

    def __post_init__(self) -> None:
        super().__post_init__()
        to_hcfl(self)


@dataclass
class FedRCAdaptiveParams(RangeChecked):
    num_clusters: int = ranged(6, ">= 1")  # K^0 (FedRC paper Fig. 7)
    delta: float = 0.05  # FedRC paper: 0.05 (ablation 0.025)
    warmup: int = 0  # no removal before this round
    split: bool = False  # FedRC paper trains K full models (true: the Table 11 shared extractor)
    test_em_iters: int = 10  # E-steps a non-participating client runs on its labelled data

    def __post_init__(self) -> None:
        super().__post_init__()
        to_hcfl(self)


def to_hcfl(p: HCFLPlusParams | HCFLPrimeParams | FedRCAdaptiveParams) -> HCFLParams:
    """The composition a preset stands for."""
    if isinstance(p, FedRCAdaptiveParams):
        return HCFLParams(num_clusters=p.num_clusters, split=p.split, formulation="fedrc-ratio", weights="soft-em",
                          weights_scope="client", adaptive="low-mass", delta=p.delta, warmup=p.warmup,
                          test_em_iters=p.test_em_iters)
    tiers = backbone_tiers(p.backbone, p.mu_tilde, p.prox)
    if isinstance(p, HCFLPrimeParams):
        return HCFLParams(num_clusters=p.num_clusters, split=True, adaptive="cfl", distance="update-cosine",
                          scwu=False, tol1=p.tol1, tol2=p.tol2, warmup=p.warmup, min_size=p.min_size,
                          max_clusters=p.max_clusters, test_em_iters=p.test_em_iters, **tiers)  # type: ignore[arg-type]
    principle = p.principle if p.principle != "auto" else ("cscp" if p.backbone == "fedrc" else "ascp")
    distance = "update-cosine" if p.distance == "update-cosine" else f"prototype-{principle}"
    return HCFLParams(num_clusters=p.num_clusters, split=True, adaptive=p.adaptive, distance=distance,
                      reduce=p.reduce, prototypes=p.prototypes, confidence=p.confidence, rho=p.rho,
                      include_diagonal=p.include_diagonal,
                      strict=p.strict, scwu=p.scwu, warmup=p.warmup, max_clusters=p.max_clusters,
                      test_em_iters=p.test_em_iters, **tiers)  # type: ignore[arg-type]


def composition_overrides(p: HCFLPlusParams | HCFLPrimeParams | FedRCAdaptiveParams) -> list[str]:
    """``algorithm.<key>=<value>`` overrides that give the preset's composition with ``algorithm=hcfl``."""
    out = []
    for f in dataclasses.fields(HCFLParams):
        v = getattr(to_hcfl(p), f.name)
        out.append(f"algorithm.{f.name}={'null' if v is None else str(v).lower() if isinstance(v, bool) else v}")
    return out


def build_preset(ctx: Context, params: HCFLPlusParams | HCFLPrimeParams | FedRCAdaptiveParams) -> HCFL:
    return HCFL(ctx, to_hcfl(params))


ALGORITHMS.add("hcfl-plus", build_preset,
               "HCFL+ (HCFL paper): φ + K heads, sample-wise EM, split by eq. 8 on prototype distances, remove; "
               "backbone=fesem|fedem|fedrc|fedsoft", HCFLPlusParams, paper="HCFL paper")
ALGORITHMS.add("hcfl-prime", build_preset,
               "HCFL' (HCFL paper Table 10): backbone tiers 1–2 + CFL tiers 3–4 + the extractor/head split",
               HCFLPrimeParams, paper="HCFL paper")
ALGORITHMS.add("fedrc-adaptive", build_preset,
               "adaptive FedRC (FedRC paper App. H.4): start with K0 models, remove those with mass below delta",
               FedRCAdaptiveParams, paper="FedRC paper")
