"""Registered scenarios, one module per family; each module registers its own scenarios when it is imported
(``fedcluster.catalog`` says which module holds which name, so a lookup imports only that family:
importing this package imports none of them; ``fedcluster.catalog.registry.load_builtins`` imports them all).

A scenario is ``fn(data, num_clients, params, rng) -> Federation`` (``data`` is None for synthetic
sources). Its parameters are a typed dataclass (``scenario.<name>=value``) with the seeds' defaults.
"""
