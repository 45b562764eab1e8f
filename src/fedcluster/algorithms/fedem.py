"""FedEM (Marfoq et al. 2021): soft EM over K models with client-wise mixture weights.

Composition (HCFL tiers, HCFL paper Sec. 3): tier 1 ``formulation`` (default ``conditional``, L_k = P(y|x; θ_k)),
tier 2 ``soft-em`` (client scope, or HCFL+'s sample scope with μ̃), fixed K. One round:

1. send the K models to the cohort (all K forward passes of the whole cohort run as one batched pass);
2. E-step: γ_{i,j;k} = softmax_k(log ω_{i;k} + log L_k(x_ij, y_ij)), ω_{i;k} = mean_j γ_{i,j;k}
   (FedRC paper eq. 3; HCFL paper eq. 4–5 with ``weights_scope=sample``);
3. every (client, k) pair runs one local epoch on Σ_j γ_{i,j;k} f(x_ij, y_ij; θ_k) / |batch|
   (FedRC paper eq. 5), all pairs as units of one trainer call (with ``split``: one unit per client, HCFL paper eq.
   6–7);
4. server: θ_k ← θ_k + η_g Σ_i N_i Δθ_{i,k} / Σ_i N_i (FedRC paper Alg. 1 step 4).

Prediction: Σ_k ω_{i;k} softmax(m_k(x)) (FedRC paper App. H.2). Test clients that never train run the E-step on
their labelled data with the models fixed (``test_em_iters`` iterations from ω = 1/K), as FedRC paper does.
The method is its parts: the formulation named by ``formulation`` (:data:`~fedcluster.tiers.formulation.
FORMULATION_PARTS`, with the server statistics it keeps) and the :class:`~fedcluster.tiers.weighting.SoftEM`
E-step; the round is the template of :meth:`~fedcluster.algorithms.clustered.ClusteredAlgorithm.step` with the soft
plan its E-step gives (:meth:`~fedcluster.algorithms.clustered.ClusteredAlgorithm.soft_plan`: steps 1–2, K models each
way), so the method is its parts alone. Any formulation composes with either scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedcluster.algorithms.base import Context
from fedcluster.algorithms.clustered import ClusteredAlgorithm, ClusteredParams
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.ranges import ranged
from fedcluster.tiers.adaptation import Fixed
from fedcluster.tiers.formulation import FORMULATION_PARTS, Formulation
from fedcluster.tiers.weighting import SoftEM

PAPER = ("Othmane Marfoq, Giovanni Neglia, Aurélien Bellet, Laetitia Kameni, Richard Vidal. Federated Multi-Task "
         "Learning under a Mixture of Distributions. Advances in Neural Information Processing Systems (NeurIPS) 34, "
         "2021.")
MAX_TEST_EM_ITERS = 10_000  # E-steps of a test client (each a pass over the K models' losses): beyond, no change


@dataclass
class FedEMParams(ClusteredParams):
    formulation: Formulation = "conditional"  # tier 1
    weights_scope: Literal["client", "sample"] = "client"  # tier 2: FedEM's ω_{i;k} or HCFL+'s ω_{i,j;k}
    mu_tilde: float = ranged(0.0, "[0, 1]")  # HCFL+ μ̃ (sample scope): ω_{i,j;k} ← μ̃ γ + (1 − μ̃) ω̃
    test_em_iters: int = ranged(  # E-steps a non-participating client runs on its labelled data
        10, f"1..{MAX_TEST_EM_ITERS}")


@ALGORITHMS.register("fedem", "FedEM: soft EM over K models, client-wise mixture weights, ensemble prediction",
                     FedEMParams, paper=PAPER)
class FedEM(ClusteredAlgorithm):
    def __init__(self, ctx: Context, params: FedEMParams) -> None:
        super().__init__(ctx, params, formulation=FORMULATION_PARTS[params.formulation](ctx.fed.num_classes),
                         weighting=SoftEM(params.mu_tilde, params.test_em_iters), adaptation=Fixed(),
                         sample_scope=params.weights_scope == "sample")

    @classmethod
    def streams_aggregation(cls, params: FedEMParams) -> bool:
        return not params.split  # the E-step weights are known before training
