"""What fedcluster offers, readable without importing any implementation: the registries of algorithms, data
sets, scenarios and models (registry), where each built-in name is registered (names), their parameter tables
(params, generated) and the papers they cite (papers)."""
