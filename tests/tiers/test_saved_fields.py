"""A saved field is declared once (fedcluster.tiers.saved_fields): that declaration alone decides what a checkpoint
holds, in which runs, what a resume checks it against and what an older checkpoint that lacks it loads as; the
guide's example declaration (docs/extending.md) is real code."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from fedcluster.algorithms.cluster_method import ClusterMethod
from fedcluster.algorithms.clustered import ClusteredAlgorithm
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.engine.algorithm import Algorithm
from fedcluster.tiers.cluster_book import ClusterBook
from fedcluster.tiers.cluster_state import ClusterState
from fedcluster.tiers.saved_fields import Saved, StateField
from fedcluster.tiers.saved_kinds import Book, Counts, Flags, Positions, Reals

GUIDE = Path(__file__).parents[2] / "docs" / "extending.md"


class Declared(Algorithm):
    """A method with one field of each sort, built without a run."""

    scores = Saved[np.ndarray](Reals(low=0))
    warm = Saved[bool](Flags(), kept=lambda alg: alg.params.warm)
    seen = Saved[np.ndarray](Flags(), default=lambda alg: np.ones(2, dtype=bool))
    rounds_done = StateField[int](Counts(at_most_rounds=True))
    book = StateField[ClusterBook | None](Book(), kept=lambda alg: alg.book is not None)

    def run_round(self, round_: int, clients: np.ndarray) -> Any:
        raise NotImplementedError


def _declared(warm: bool, book: bool = False) -> Declared:
    alg = Declared.__new__(Declared)
    alg.params = SimpleNamespace(warm=warm)
    alg.state = ClusterState(models={"w": torch.ones(1, 3)}, omega=np.ones((2, 1)), book=ClusterBook.start(1) if book
                             else None)
    alg.scores, alg.warm, alg.seen, alg.rounds_done = np.array([0.5, 2.0]), True, np.array([True, False]), 3
    return alg


def test_the_declarations_are_what_a_checkpoint_holds_state_fields_first() -> None:
    assert _declared(False).saved_fields() == ("models", "omega", "rounds_done", "scores", "seen")
    assert _declared(True, book=True).saved_fields() == ("models", "omega", "rounds_done", "book", "scores", "seen",
                                                         "warm")
    state = _declared(True, book=True).state_dict()
    assert list(state) == list(_declared(True, book=True).saved_fields())
    assert state["book"] == ClusterBook.start(1).state_dict() and state["rounds_done"] == 3  # plain data
    assert set(Declared.saved_kinds()) == {"models", "omega", "scores", "warm", "seen", "rounds_done", "book"}


def test_a_checkpoint_loads_back_and_an_older_one_takes_the_default() -> None:
    source = _declared(True, book=True)
    source.state.book.next_id = 7
    target = _declared(True, book=True)
    target.scores, target.rounds_done = np.zeros(2), 0
    target.load_state_dict(source.state_dict())
    np.testing.assert_array_equal(target.scores, [0.5, 2.0])
    assert target.rounds_done == 3 and target.state.rounds_done == 3  # through the state
    assert isinstance(target.book, ClusterBook) and target.book.next_id == 7
    older = {k: v for k, v in source.state_dict().items() if k != "seen"}  # written before ``seen`` was saved
    target.load_state_dict(older)
    np.testing.assert_array_equal(target.seen, [True, True])


def test_a_resume_checks_each_field_against_its_declared_kind() -> None:
    alg = _declared(False)
    alg.ctx = SimpleNamespace(fed=SimpleNamespace(num_clients=2))
    state = alg.state_dict()
    assert alg.state_problem(state, 3) is None
    assert "algorithm.scores holds values outside" in alg.state_problem({**state, "scores": np.array([-1.0])}, 3)
    assert "algorithm.rounds_done" in alg.state_problem({**state, "rounds_done": 4}, 3)


def test_an_unset_field_is_missing_and_the_class_reads_its_declaration() -> None:
    alg = Declared.__new__(Declared)
    assert not hasattr(alg, "scores")
    assert isinstance(Declared.scores, Saved) and Declared.scores.kind == Reals(low=0)


def test_a_subclass_that_names_a_state_field_again_replaces_it() -> None:
    """HardClusters saves the state's ``assigned`` as ``cluster`` (never −1), not under both names."""
    assert ClusterMethod.saved_kinds()["assigned"] == Positions(unassigned=True)
    hard = HardClusters.saved_kinds()
    assert "assigned" not in hard and hard["cluster"] == Positions()
    assert HardClusters.cluster.path == "assigned"


def test_the_old_declarations_and_a_field_without_a_kind_are_refused_at_once() -> None:
    for old in ("saved", "saved_when_kept", "saved_defaults"):
        with pytest.raises(TypeError, match="declare each saved attribute once, with its kind"):
            type("Old", (Algorithm,), {old: {}})
    with pytest.raises(TypeError, match="needs its kind"):
        Saved("alpha")


def test_the_guides_declaration_is_real_code() -> None:
    block = re.search(r"```python\n(class Annealed\(TemperedEM\):\n.*?)```", GUIDE.read_text(), re.S)
    assert block is not None, "docs/extending.md shows how a method declares a saved field"
    scope: dict[str, Any] = {"TemperedEM": ClusteredAlgorithm, "Saved": Saved, "Reals": Reals, "Flags": Flags,
                             "np": np}
    exec(block.group(1), scope)
    annealed = scope["Annealed"]
    kinds = annealed.saved_kinds()
    assert kinds["temperatures"] == Reals(low=0) and kinds["warm"] == Flags() and "gamma" in kinds
    assert annealed.warm.kept(SimpleNamespace(params=SimpleNamespace(temperature=2.0)))
    assert not annealed.warm.kept(SimpleNamespace(params=SimpleNamespace(temperature=1.0)))
