"""What a tracker is told (the observer protocol) and what every tracker logs: the flat config, a round's
metrics, the result files; ``require`` names the extra to install when a tracker's package is missing."""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from fedcluster.config.run_config import RunConfig
from fedcluster.errors import UserError

INSTALL_HINT = "pip install 'fedcluster[tracking]'"
ARTIFACT_FILES = ("config.yaml", "rounds.csv", "clients.csv", "summary.json", "clusters.jsonl")


class RunObserver(Protocol):
    """What the run loop tells a tracker: the start (with rows of a resumed run), each round, the end."""

    def start(self, rows: Sequence[Mapping[str, float]]) -> None: ...

    def log_round(self, row: Mapping[str, Any]) -> None: ...

    def end(self, status: str) -> None: ...


def flatten_config(cfg: RunConfig) -> dict[str, str]:
    """The resolved config as flat ``key -> text``; section parameters as ``algorithm.mu`` (the CLI's keys)."""
    flat: dict[str, str] = {}
    for key, value in cfg.to_dict().items():
        if key.endswith("_params"):
            for sub, v in value.items():
                flat[f"{key[:-7]}.{sub}"] = _text(v)
        else:
            flat[key] = _text(value)
    return flat


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def round_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The numeric, finite columns of one ``rounds.csv`` row, without the step column ``round``."""
    return {k: float(v) for k, v in row.items()
            if k != "round" and isinstance(v, int | float) and math.isfinite(float(v))}


def result_files(run_dir: Path) -> list[Path]:
    """The run directory's result files that are logged as artefacts (not the checkpoint)."""
    return [run_dir / n for n in ARTIFACT_FILES if (run_dir / n).is_file()] + sorted(run_dir.glob("*.png"))


def require(*modules: str, hint: str = INSTALL_HINT) -> None:
    """One line naming the extra to install when a tracker's package is missing."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise UserError(f"tracking needs the Python package {name.split('.')[0]!r}, which is not installed; "
                            f"install it with `{hint}` or run with tracking=none") from None
