"""Every saved field of every registered method (tests/conformance) and of the variants below is checked on resume
for its values, from the kind its class declares (fedcluster.tiers.saved_kinds): for each field, values a crafted
checkpoint with a valid checksum could hold (tests/bad_inputs/crafted_state.py) are refused in one line naming the
field; the untouched state passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.engine.transfer import state_to_device
from fedcluster.tiers import saved_kinds as kinds
from tests.bad_inputs.crafted_state import BY_KIND
from tests.conformance.methods import refuses_crafted_values
from tests.support.method_runs import played

FAST = ["num_clients=6", "progress=false", "threads=1"]
REGRESSION = ["scenario=mixed-regression", "dataset=mixed-regression", "model=linear-nobias"]
# every registered method with its conformance settings: tests/conformance/test_every_method.py; here the fields a
# method keeps only with other settings
VARIANTS = {
    "fedrc adam": ["algorithm=fedrc", "algorithm.adam=true"],
    "fedem joint": ["algorithm=fedem", "algorithm.formulation=joint"],
    "hcfl splits": ["algorithm=hcfl", "algorithm.rho=0", "algorithm.num_clusters=2"],
    "fedmd phase 1": ["algorithm=fedmd", *REGRESSION, "algorithm.num_clusters=3", "algorithm.phase1_rounds=1"],
    "fedmd oneshot": ["algorithm=fedmd", *REGRESSION, "algorithm.num_clusters=3", "algorithm.init=oneshot"],
}
SLOW = {"fedem joint", "fedmd phase 1"}  # slow to play
_PLAYED: dict[str, Any] = {}


def _played(name: str, root: Path) -> tuple[Any, dict[str, Any]]:
    """The run ``name`` played for 2 rounds (once per session) and its saved state on the CPU."""
    if name not in _PLAYED:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            run = played(root, [*FAST, *VARIANTS[name]], 2)
        finally:
            torch.set_num_threads(threads)
        _PLAYED[name] = (run, state_to_device(run.alg.state_dict(), torch.device("cpu")))
    return _PLAYED[name]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in VARIANTS])
def test_every_saved_field_of_a_variant_is_checked_for_its_values(tmp_path: Path, name: str) -> None:
    refuses_crafted_values(*_played(name, tmp_path), 2)


def test_every_kind_has_crafted_values() -> None:
    classes = [entry.obj for entry in ALGORITHMS if isinstance(entry.obj, type)]  # presets are functions
    declared = {type(kind) for cls in classes for kind in cls.saved_kinds().values()}
    assert declared <= set(BY_KIND)


def test_a_method_that_does_not_declare_a_kind_is_refused_at_once() -> None:
    from fedcluster.engine.algorithm import Algorithm

    with pytest.raises(TypeError, match="kind"):
        type("Untyped", (Algorithm,), {"saved": ("alpha",)})


@pytest.mark.parametrize("value,kind,word", [
    (np.array([0, 3]), kinds.Positions(), "outside [0, 2]"),
    (np.array([-1, 2]), kinds.Positions(unassigned=True), None),
    ([0.5, float("nan")], kinds.Reals(low=0, high=1), "non-finite"),
    (float("nan"), kinds.Reals(low=-1, high=1, nan_ok=True), None),
    (np.array([[0.5, 0.5], [0.2, 0.2]]), kinds.Rows(), "row 1 sums to 0.4"),
    ([0, 5], kinds.Counts(at_most_rounds=True), "outside [0, 4]"),
    ([True, 1], kinds.Flags(), "true/false"),
    ([1.0, 2.0], kinds.non_negative(cluster_axis=0), "2 entries along its cluster axis"),
])
def test_a_kind_names_what_is_wrong(value: Any, kind: kinds.Kind, word: str | None) -> None:
    problem = kind.problem(value, "f", kinds.Limits(k=3, rounds=4, clients=5))
    assert problem is None if word is None else word in problem, problem
