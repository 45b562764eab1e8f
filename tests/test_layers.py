"""The package's layers only point down: data -> models -> tiers -> engine -> algorithms -> reproduce/flower ->
cli. Every import of a fedcluster module (at the top of a file or inside a function) is read from the source."""

from __future__ import annotations

import ast
from pathlib import Path

import fedcluster

LAYERS = {"data": 0, "models": 1, "tiers": 2, "engine": 3, "algorithms": 4, "reproduce": 5, "flower": 5, "cli": 6}
ROOT = Path(fedcluster.__file__).parent


def _layer(module: str) -> str | None:
    """The layer of a dotted module name inside fedcluster (None: a shared module such as config or errors)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "fedcluster" and len(parts) > 1 and parts[1] in LAYERS else None


def fedcluster_imports(path: Path) -> list[tuple[str, int]]:
    """(module, line) of every fedcluster import in ``path``; relative imports resolved against its package."""
    package = ["fedcluster", *path.relative_to(ROOT).parent.parts]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.append((module, node.lineno))
    return [(m, line) for m, line in out if m.split(".")[0] == "fedcluster"]


def upward_imports() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        own = _layer(".".join(["fedcluster", *path.relative_to(ROOT).with_suffix("").parts]))
        if own is None:
            continue
        for module, line in fedcluster_imports(path):
            target = _layer(module)
            if target is not None and LAYERS[target] > LAYERS[own]:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {module} ({target})")
    return bad


def test_imports_only_point_down() -> None:
    assert not upward_imports(), "\n".join(upward_imports())


def test_the_check_reads_the_imports_it_judges() -> None:
    assert "fedcluster.engine.algorithm" in {m for m, _ in fedcluster_imports(ROOT / "engine" / "runner.py")}
    assert "fedcluster.models.params" in {m for m, _ in fedcluster_imports(ROOT / "tiers" / "adaptive.py")}
    assert _layer("fedcluster.algorithms.base") == "algorithms" and _layer("fedcluster.config") is None
