"""HCFL's tiers as small named parts (HCFL paper Sec. 3): tier 1 `formulation`, tier 2 `weights`,
tier 3 `adaptive` (how K^t changes), tier 4 `distance` (the client distance that drives it)."""
