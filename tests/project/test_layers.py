"""The package's layers only point down: catalog/storage -> config -> data -> models -> tiers/metrics/tracking ->
engine -> algorithms -> reproduce/flower -> app, and no module imports itself through others (no circle). Every
import of a fedcluster module (at the top of a file or inside a function) is read from the source."""

from __future__ import annotations

import ast
from pathlib import Path

import fedcluster

LAYERS = {"catalog": 0, "storage": 0, "config": 1, "data": 2, "models": 3, "tiers": 4, "metrics": 4, "tracking": 4,
          "engine": 5, "algorithms": 6, "reproduce": 7, "benchmark": 7, "flower": 7, "app": 8}
SHARED = {"errors", "_version"}  # modules every layer may use
ROOT = Path(fedcluster.__file__).parent


def _layer(module: str) -> str | None:
    """The layer of a dotted module name inside fedcluster (None: a shared module such as errors)."""
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


def module_graph() -> dict[str, set[str]]:
    """module -> the fedcluster modules it imports (``from package import module`` resolved to the module)."""
    paths = {".".join(["fedcluster", *p.relative_to(ROOT).with_suffix("").parts]).removesuffix(".__init__"): p
             for p in sorted(ROOT.rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        targets = set()
        for module, _ in fedcluster_imports(path):
            while module not in paths and "." in module:  # `from fedcluster.x import name`: the module x
                module = module.rsplit(".", 1)[0]
            if module in paths and module != name:
                targets.add(module)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle: the strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_imports_only_point_down() -> None:
    assert not upward_imports(), "\n".join(upward_imports())


def test_no_import_circle() -> None:
    assert not circles(module_graph()), circles(module_graph())


def test_the_root_holds_only_the_entry_points_and_shared_modules() -> None:
    loose = {p.stem for p in ROOT.glob("*.py")} - {"__init__", "__main__", *SHARED}
    assert not loose, f"modules outside a layer package: {sorted(loose)}"
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert packages == set(LAYERS), packages ^ set(LAYERS)


def test_the_circle_check_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_check_reads_the_imports_it_judges() -> None:
    assert "fedcluster.engine.algorithm" in {m for m, _ in fedcluster_imports(ROOT / "engine" / "runner.py")}
    assert "fedcluster.models.param_dict" in {m for m, _ in fedcluster_imports(ROOT / "tiers" / "cluster_book.py")}
    assert _layer("fedcluster.algorithms.base") == "algorithms" and _layer("fedcluster.errors") is None
    assert "fedcluster.config.yaml_dialect" in module_graph()["fedcluster.config.validation"]



def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_the_lower_tiers_never_reach_the_split_rules() -> None:
    """Tier 1 (formulation) and tier 2 (weighting) reach the cluster book, never tier 3's split rules (adaptation)
    nor the tier-4 distances those rules read."""
    graph = module_graph()
    for tier in ("formulation", "weighting", "cluster_state", "cluster_book"):
        reached = reachable(graph, f"fedcluster.tiers.{tier}")
        rules = {"fedcluster.tiers.adaptation", "fedcluster.tiers.regrouping", "fedcluster.tiers.distance"}
        assert not reached & rules, (tier, sorted(reached))
    assert reachable({"a": {"b"}, "b": {"c"}, "c": set()}, "a") == {"b", "c"}


# -- inside the engine: its rooms, each importing only rooms on lower floors ----------------------------------
ENGINE_ROOMS = {  # room -> floor
    "shared": 0,  # engine/<module>.py in ENGINE_SHARED: parameters, host-to-device copies, memory, devices
    "training": 1, "evaluation": 1,  # engine/training/, engine/evaluation/: local training; scores and forwards
    "contract": 2,  # engine/<module>.py in ENGINE_CONTRACT: what methods and trainers agree on
    "trainers": 3,  # engine/trainers/: the clients' work in this process or on remote nodes
    "distributed": 4,  # engine/distributed/: a run over the ranks of a torchrun job
    "loop": 5,  # every other engine/<module>.py: the run loop, its callbacks and its evaluation step
}
ENGINE_SHARED = {"params", "transfer", "solver", "memory", "device", "sampling", "interrupts"}
ENGINE_CONTRACT = {"protocol", "algorithm", "placement"}


def engine_room(module: str) -> str | None:
    """The room of a module inside fedcluster.engine (None outside the engine, or the package's __init__)."""
    parts = module.split(".")
    if parts[:2] != ["fedcluster", "engine"] or len(parts) < 3:
        return None
    if parts[2] in ENGINE_ROOMS:
        return parts[2]
    return "shared" if parts[2] in ENGINE_SHARED else "contract" if parts[2] in ENGINE_CONTRACT else "loop"


def engine_back_arrows() -> list[str]:
    """Imports inside the engine from one room to another room that is not on a lower floor."""
    bad = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        own = engine_room(".".join(["fedcluster", *path.relative_to(ROOT).with_suffix("").parts]))
        if own is None:
            continue
        for module, line in fedcluster_imports(path):
            target = engine_room(module)
            if target is not None and target != own and ENGINE_ROOMS[target] >= ENGINE_ROOMS[own]:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {module} ({target})")
    return bad


def test_engine_rooms_only_import_lower_floors() -> None:
    assert not engine_back_arrows(), "\n".join(engine_back_arrows())


def test_no_circle_between_engine_rooms() -> None:
    graph: dict[str, set[str]] = {room: set() for room in ENGINE_ROOMS}
    for module, targets in module_graph().items():
        if (own := engine_room(module)) is not None:
            graph[own] |= {t for target in targets if (t := engine_room(target)) not in (None, own)}
    assert not circles(graph), circles(graph)


def test_every_engine_folder_is_a_room() -> None:
    folders = {p.name for p in (ROOT / "engine").iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert folders <= set(ENGINE_ROOMS), folders - set(ENGINE_ROOMS)
    assert engine_room("fedcluster.engine.runner") == "loop" and engine_room("fedcluster.engine.params") == "shared"
    assert engine_room("fedcluster.engine.trainers.local") == "trainers" and engine_room("fedcluster.data") is None


def test_the_run_loop_is_given_where_clients_work_not_subclassed() -> None:
    """Where the clients work is a placement passed as ``Run(..., placement=...)``; no module subclasses the loop."""
    subclasses = [f"{p.relative_to(ROOT)}:{node.lineno} {node.name}" for p in sorted(ROOT.rglob("*.py"))
                  for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)
                  and any(isinstance(b, ast.Name) and b.id == "Run" for b in node.bases)]
    assert not subclasses, subclasses
