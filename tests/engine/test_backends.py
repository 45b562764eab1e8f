"""engine.backends: the in-process, sharded and remote trainers are one protocol, and the methods ask their backend
for nothing else (so they run unchanged on any of them)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import torch
from torch import nn

import fedcluster
from fedcluster.engine.distributed.sharded import ShardedTrainer
from fedcluster.engine.protocol import Trainer
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.trainers.remote import RemoteTrainer

ROOT = Path(fedcluster.__file__).parent


def _data() -> tuple[nn.Module, torch.Tensor, torch.Tensor, np.ndarray]:
    return nn.Linear(3, 2), torch.zeros(6, 3), torch.zeros(6, dtype=torch.long), np.array([0, 3, 6])


def test_every_backend_offers_the_protocol() -> None:
    module, x, y, ptr = _data()
    backends = [LocalTrainer(module, x, y, ptr, "classification", seed=0),
                ShardedTrainer(module, x, y, ptr, "classification", seed=0),
                RemoteTrainer(module, x, y, ptr, "classification", 0, send=lambda requests: [])]
    for backend in backends:
        assert isinstance(backend, Trainer), type(backend).__name__
        backend.close()


def _backend_calls(path: Path) -> set[tuple[str, int]]:
    """(member, line) of every ``<...>.trainer.<member>`` a module reads (``self.ctx.trainer.train`` ...)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "trainer":
            out.add((node.attr, node.lineno))
    return out


def test_the_methods_ask_their_backend_only_for_the_protocol() -> None:
    offered = {name for name in vars(Trainer) if not name.startswith("_")}
    calls = {(f"{p.relative_to(ROOT)}:{line}", member)
             for folder in ("algorithms", "tiers") for p in sorted((ROOT / folder).rglob("*.py"))
             for member, line in _backend_calls(p)}
    assert {m for _, m in calls} >= {"train", "losses", "per_client", "sibling"}  # the scan reads real calls
    outside = sorted(f"{where} .trainer.{member}" for where, member in calls if member not in offered)
    assert not outside, outside


def test_the_backends_know_nothing_of_the_round_loop_or_the_methods() -> None:
    from tests.project.test_layers import fedcluster_imports

    above = ("fedcluster.engine.runner", "fedcluster.engine.callbacks", "fedcluster.engine.checkpointing",
             "fedcluster.engine.distributed.ranks", "fedcluster.engine.algorithm", "fedcluster.algorithms",
             "fedcluster.flower")
    found = [f"{p.name}:{line} imports {m}" for p in sorted((ROOT / "engine" / "backends").glob("*.py"))
             for m, line in fedcluster_imports(p) if m.startswith(above)]
    assert not found, found
