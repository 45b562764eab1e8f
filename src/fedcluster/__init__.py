"""fedcluster: clustered federated learning under one fast engine.

The library API (:mod:`fedcluster.app.api`) is importable from here; it loads lazily, so ``import fedcluster``
stays light: ``fedcluster.run(config, **overrides)``, ``fedcluster.build_federation(config, **overrides)``,
``fedcluster.load_config(config, **overrides)`` and the :class:`~fedcluster.app.api.Result` of a run.
"""

from __future__ import annotations

import os
from typing import Any

from fedcluster._version import __version__

# Deterministic cuBLAS reads this once, when it starts: set before any CUDA work of the process
# (engine.device.set_cublas_workspace; the value is engine.device.CUBLAS_SETTING, unless the user set one).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

__all__ = ["Result", "__version__", "build_federation", "load_config", "run"]


def __getattr__(name: str) -> Any:
    if name in ("Result", "build_federation", "load_config", "run"):
        from fedcluster.app import api

        return getattr(api, name)
    raise AttributeError(f"module 'fedcluster' has no attribute {name!r}")
