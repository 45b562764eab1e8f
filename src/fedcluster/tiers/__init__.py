"""HCFL's tiers as small parts a method holds (HCFL paper Sec. 3), one module per tier with its rules:
tier 1 ``formulation`` (FormulationPart), tier 2 ``weighting`` (SoftWeighting / HardWeighting; the config key is
``weights``), tier 3 ``adaptation`` (Adaptation), tier 4 ``distance`` (ClientDistance). Beside them: the stable
cluster ids and how a change of K applies (``cluster_book``), the one server update ``aggregation``, the server
state ``cluster_state`` (ClusterState) and the round's ``cohort``."""
