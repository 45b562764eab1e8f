"""HCFL's tiers as small parts a method holds (HCFL paper Sec. 3): tier 1 ``formulation`` (FormulationPart),
tier 2 ``weight_rules`` (SoftRule / HardRule, over the rules of ``weights``), tier 3 ``adaptation`` (Adaptation,
over the rules of ``adaptive``), tier 4 ``distance`` (ClientDistance); the one server update ``aggregation``;
the server state ``cluster_state`` (ClusterState) and the round's ``cohort``."""
