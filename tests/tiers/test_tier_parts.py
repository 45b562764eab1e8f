"""The methods are built from tier parts: every tier option of algorithm=hcfl is a part in its table, no method
class sits more than three levels below the Algorithm protocol, hard and soft methods share one cluster-state type,
and the state's split / removal keeps every per-cluster field consistent."""

from __future__ import annotations

import typing
from pathlib import Path

import numpy as np
import pytest
import torch

import fedcluster.algorithms.hcfl as hcfl
from fedcluster.algorithms.cluster_method import ClusterMethod
from fedcluster.algorithms.clustered import ClusteredAlgorithm
from fedcluster.algorithms.hardclusters import HardClusters
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.algorithm import Algorithm
from fedcluster.engine.runner import Run
from fedcluster.tiers.adaptation import (
    ADAPTATIONS,
    CFLSplits,
    Fixed,
    GapSplits,
    InRound,
    LowMass,
)
from fedcluster.tiers.cluster_book import ClusterBook
from fedcluster.tiers.cluster_state import ClusterState
from fedcluster.tiers.distance import DISTANCE_PARTS, HeadUpdateDistance, PrototypeDistance, UpdateCosine
from fedcluster.tiers.formulation import FORMULATION_PARTS, Formulation, ServerStatistics
from fedcluster.tiers.regrouping import (
    DirectionGroups,
    ICFLSplits,
    SpectralSplits,
    StoCFLMerges,
    ThresholdGroups,
    TreeCut,
)
from fedcluster.tiers.weighting import WEIGHTINGS, HardDistance, HardLoss, SoftEM

FAST = ["num_clients=8", "progress=false", "threads=1", "rounds=1"]


def _alg(tmp_path: Path, overrides: list[str]) -> Algorithm:
    cfg, typed = resolve(load_raw(None, [*FAST, f"out={tmp_path / 'x'}", *overrides]))
    return Run(cfg, typed).alg


def test_every_hcfl_tier_option_is_a_part() -> None:
    """Adding a tier option is adding a part: each name the config accepts has an entry in its table."""
    tables = [(Formulation, FORMULATION_PARTS), (hcfl.WeightingName, WEIGHTINGS), (hcfl.Adaptive, ADAPTATIONS),
              (hcfl.Distance, DISTANCE_PARTS)]
    for names, table in tables:
        assert set(typing.get_args(names)) == set(table)


@pytest.mark.parametrize("overrides,parts", [
    ([], (SoftEM, GapSplits, PrototypeDistance)),
    (["algorithm.weights=hard-loss", "algorithm.adaptive=cfl", "algorithm.distance=update-cosine"],
     (HardLoss, CFLSplits, type(None))),
    (["algorithm.weights=hard-distance", "algorithm.adaptive=fixed"], (HardDistance, Fixed, type(None))),
    (["algorithm.adaptive=low-mass"], (SoftEM, LowMass, type(None))),
    (["algorithm.adaptive=split", "algorithm.distance=update-cosine"], (SoftEM, GapSplits, UpdateCosine)),
    (["algorithm.prototypes=head-update"], (SoftEM, GapSplits, HeadUpdateDistance)),
])
def test_hcfl_holds_the_parts_its_config_names(tmp_path: Path, overrides: list[str], parts: tuple) -> None:
    alg = _alg(tmp_path, ["algorithm=hcfl", *overrides])
    weighting, adaptation, distance = parts
    assert type(alg.weighting) is weighting and type(alg.adaptation) is adaptation
    assert type(getattr(alg.adaptation, "distance", None)) is distance


def test_no_method_sits_more_than_three_levels_below_the_protocol() -> None:
    """Algorithm → ClusterMethod → ClusteredAlgorithm / HardClusters → method (or Algorithm → method): a method file
    reads top to bottom, and every cluster method, soft or hard, stands on the one cluster-method base."""
    for entry in ALGORITHMS.registered():
        if isinstance(entry.obj, type):
            chain = entry.obj.__mro__[:entry.obj.__mro__.index(Algorithm)]
            assert len(chain) <= 3, f"{entry.name}: {[c.__name__ for c in chain]}"
            if issubclass(entry.obj, ClusteredAlgorithm | HardClusters):
                assert chain[-1] is ClusterMethod, f"{entry.name}: {[c.__name__ for c in chain]}"


# hard and soft methods share one cluster state: every registered method's, tests/conformance/test_every_method.py


def _state(k: int = 2, m: int = 4, rows: int = 3, classes: int = 3) -> tuple[ClusterState, np.ndarray]:
    rng = np.random.default_rng(0)
    owner = np.repeat(np.arange(m), rows)
    omega = rng.dirichlet(np.ones(k), m)
    gamma = rng.dirichlet(np.ones(k), m * rows).astype(np.float32)
    stats = ServerStatistics.start(m, k, classes)
    stats.counts = rng.random((m, k, classes))
    state = ClusterState(models={"head.weight": torch.randn(k, 2, 3)}, omega=omega, gamma=gamma,
                         sample_prior=gamma.copy(), stats=stats, book=ClusterBook.start(k),
                         assigned=np.array([0, 0, 1, 1]))
    return state, owner


def test_cluster_state_split_keeps_every_field_consistent() -> None:
    state, owner = _state()
    local = {"head.weight": torch.randn(4, 2, 2, 3)}  # [m, K, ...]
    old = {n: v.clone() for n, v in state.models.items()}
    counts = state.stats.counts.copy()
    new = state.split(0, np.array([0]), np.array([1]), local, np.ones((4, 2)), np.arange(4), old, soft_update=True,
                      global_lr=1.0, shared_body=False, owner=owner, round_=1)
    assert new == 2 and state.num_clusters == 3 and state.book.ids == [0, 1, 2]
    for w in (state.omega, state.gamma, state.sample_prior):
        assert w.shape[1] == 3 and np.allclose(w.sum(1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(state.stats.counts[:, 2], counts[:, 0])  # HCFL Alg. 4 lines 3–4
    assert state.stats.marginal.shape[0] == 3
    np.testing.assert_array_equal(state.assigned, [0, 2, 1, 1])  # client 1 moved from position 0
    torch.testing.assert_close(state.models["head.weight"][2], local["head.weight"][1, 0])


def test_cluster_state_removal_renormalises_and_repositions() -> None:
    state, owner = _state(k=3)
    state.remove(np.array([1]), owner=owner, round_=1)
    assert state.num_clusters == 2 and state.book.ids == [0, 2]
    for w in (state.omega, state.gamma, state.sample_prior):
        assert w.shape[1] == 2 and np.allclose(w.sum(1), 1.0, atol=1e-6)
    assert state.stats.counts.shape[1] == 2 and state.stats.marginal.shape[0] == 2
    np.testing.assert_array_equal(state.assigned, [0, 0, -1, -1])  # clients of the removed position unassigned


def test_methods_say_what_to_predict_with_and_nothing_else() -> None:
    """Evaluation is one path (Algorithm.predict mixing what ``prediction`` returns): no method re-implements the
    mixing, and FedRC's hard variants no longer need a weights hook of their own."""
    for entry in ALGORITHMS.registered():
        if isinstance(entry.obj, type):
            assert entry.obj.predict is Algorithm.predict, entry.name
            assert not hasattr(entry.obj, "prediction_weights"), entry.name


def _hard_state() -> tuple[ClusterState, np.ndarray]:
    """Three hard clusters (no γ) of 5 clients with 2 training rows each."""
    models = {"w": torch.arange(3.0).view(3, 1)}
    state = ClusterState(models=models, omega=np.eye(3)[[0, 0, 1, 1, 2]], book=ClusterBook.start(3),
                         assigned=np.array([0, 0, 1, 1, 2]))
    return state, np.repeat(np.arange(5), 2)


def test_cluster_state_hard_split_merge_and_removal() -> None:
    """The hard methods' changes of K are the state's: a split copies the model, a merge folds positions, a removal
    refuses a cluster with members; the book logs each and the clients' positions follow."""
    state, _ = _hard_state()
    assert state.split_copy(0, np.array([1]), round_=1) == 3
    np.testing.assert_array_equal(state.assigned, [0, 3, 1, 1, 2])
    assert state.models["w"][3].item() == 0.0 and state.book.ids == [0, 1, 2, 3]
    keep = state.merge([(1, [2])], round_=1)
    np.testing.assert_array_equal(keep, [0, 1, 3])
    np.testing.assert_array_equal(state.assigned, [0, 2, 1, 1, 1])
    with pytest.raises(ValueError, match="without members"):
        state.remove([0], round_=1)
    state.assigned[:] = 1
    state.remove([0, 2], round_=2)
    assert state.book.ids == [1] and state.num_clusters == 1
    np.testing.assert_array_equal(state.assigned, 0)
    assert state.changes(1) == {"splits": 1.0, "merges": 1.0, "removals": 0.0}
    assert state.changes(2) == {"splits": 0.0, "merges": 0.0, "removals": 2.0}


def test_cluster_state_regroup_replaces_every_cluster_with_a_fresh_book() -> None:
    """A one-shot clustering (PACFL, FL+HC, FedGroup) is the state's too: the new stack replaces the models, the book
    starts again at ids 0..K−1 with no events, and only the clients named take their positions."""
    state, _ = _hard_state()
    state.split_copy(0, np.array([1]), round_=1)
    state.regroup({"w": torch.tensor([[5.0], [6.0]])}, np.array([0, 4]), np.array([1, 0]))
    assert state.num_clusters == 2 and state.book.ids == [0, 1] and state.book.next_id == 2
    assert state.changes(1) == {"splits": 0.0, "merges": 0.0, "removals": 0.0}
    np.testing.assert_array_equal(state.assigned, [1, 3, 1, 1, 0])
    assert state.models["w"][:, 0].tolist() == [5.0, 6.0]


@pytest.mark.parametrize(("method", "k_changes"), [("cfl", True), ("hcfl", True), ("fedem", False)])
def test_the_cluster_method_base_writes_the_k_columns_and_saves_the_book_for_either_family(
        tmp_path: Path, method: str, k_changes: bool) -> None:
    """One base for both families: a method whose K can change gets a book, its checkpoint entry and the
    splits/merges/removals columns from ClusterMethod, without a line of its own; a fixed-K method none of them."""
    alg = _alg(tmp_path, [f"algorithm={method}"])
    assert isinstance(alg, ClusterMethod)
    res = alg.run_round(0, np.arange(4))
    assert ("book" in alg.state_dict()) is k_changes and ("ids" in res.clusters) is k_changes
    assert ({"splits", "merges", "removals"} <= set(res.extra)) is k_changes
    assert alg.rounds_done == 1 and alg.state_dict()["rounds_done"] == 1


def test_cluster_record_is_one_form_for_hard_and_soft_states() -> None:
    """A hard state's record counts each (cluster, group)'s samples; a soft state's with one-hot γ says the same;
    with a book both name the ids and the events of the round just done."""
    hard, owner = _hard_state()
    groups = {"concept": (np.array([0, 1, 0, 1, 0, 1, 0, 1, 2, 2]), ["a", "b", "c", "unused"])}
    hard.rounds_done = 1
    hard.split_copy(2, np.array([4]), round_=1)
    soft = ClusterState(models=hard.models, omega=hard.omega, gamma=np.eye(4)[hard.assigned[owner]],
                        book=hard.book, assigned=hard.assigned, rounds_done=1)
    rec = hard.record(groups, owner)
    assert rec == soft.record(groups)
    assert rec["concept"] == {"names": ["a", "b", "c"],
                              "mass": [[2.0, 2.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]]}
    assert rec["ids"] == [0, 1, 2, 3] and [e["kind"] for e in rec["events"]] == ["split"]


class _Forgetful(hcfl.ClusteredAlgorithm):
    def __init__(self, ctx: typing.Any, params: typing.Any) -> None:
        super().__init__(ctx, params, formulation=FORMULATION_PARTS["conditional"](3), weighting=HardLoss(),
                         adaptation=None)  # type: ignore[arg-type]

    def step(self, round_: int, clients: np.ndarray) -> typing.Any:
        raise NotImplementedError


def test_a_clustered_method_without_one_of_its_parts_is_an_error(tmp_path: Path) -> None:
    """The parts are the constructor's required arguments: a forgotten one fails at once, naming it, instead of
    silently keeping a default."""
    alg = _alg(tmp_path, ["algorithm=ifca"])
    with pytest.raises(TypeError, match="adaptation"):
        _Forgetful(alg.ctx, alg.params)
    with pytest.raises(TypeError, match="weighting"):
        hcfl.ClusteredAlgorithm.__init__(alg, alg.ctx, alg.params, formulation=alg.formulation,  # type: ignore[call-arg]
                                         adaptation=Fixed())



def test_a_hard_method_without_its_parts_is_an_error(tmp_path: Path) -> None:
    """HardClusters takes the clusters at the start and the tier-3 part in its constructor: a forgotten or wrong one
    fails at once, naming it; CFL's part is the CFL split rule."""
    alg = _alg(tmp_path, ["algorithm=cfl"])
    assert isinstance(alg, HardClusters) and isinstance(alg.adaptation, CFLSplits)
    with pytest.raises(TypeError, match="adaptation"):
        HardClusters.__init__(alg, alg.ctx, alg.params, k0=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="adaptation"):
        HardClusters.__init__(alg, alg.ctx, alg.params, k0=1, adaptation=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="k0"):
        HardClusters.__init__(alg, alg.ctx, alg.params, adaptation=Fixed())  # type: ignore[call-arg]
    parts = {"icfl": ICFLSplits, "stocfl": StoCFLMerges, "pacfl": ThresholdGroups, "flhc": TreeCut,
             "fedgroup": DirectionGroups, "fedgwc": SpectralSplits}
    for method, part in parts.items():  # the rule's parameters are the part's, from the method's own keys
        assert type(_alg(tmp_path / method, [f"algorithm={method}"]).adaptation) is part, method  # type: ignore[attr-defined]
    assert InRound("a rule of one's own").rule


@pytest.mark.parametrize(("method", "key", "value", "field"), [
    ("icfl", "alpha0", "0.98", "alpha0"), ("stocfl", "tau", "0.3", "tau"), ("pacfl", "nu", "7.5", "nu"),
    ("pacfl", "linkage", "single", "link"), ("flhc", "num_clusters", "2", "num_clusters"),
    ("flhc", "linkage", "average", "linkage"), ("fedgroup", "num_groups", "2", "num_groups"),
    ("fedgwc", "beta", "2.5", "beta"), ("fedgwc", "perception", "column", "perception")])
def test_an_in_round_rule_part_holds_the_method_keys(tmp_path: Path, method: str, key: str, value: str,
                                                     field: str) -> None:
    """The hard methods' K-change rules are tier-3 parts built from the method's own algorithm.<key>."""
    part = _alg(tmp_path, [f"algorithm={method}", f"algorithm.{key}={value}"]).adaptation  # type: ignore[attr-defined]
    assert str(getattr(part, field)) == value


def test_the_in_round_parts_decide_as_their_rules() -> None:
    """ICFL's part keeps a cluster of aligned updates whole and splits unrelated ones; StoCFL's merges only above τ;
    PACFL's, FL+HC's and FedGroup's one-shot parts group near rows together, and a FedGroup newcomer joins the
    group of its direction."""
    a = np.kron(np.array([[1.0, -1.0], [-1.0, 1.0]]), np.ones((2, 2)))  # two groups of 2 with opposite updates
    part = ICFLSplits(alpha0=0.85, eps1=4.0)
    connectivity, labels = part.cluster_split(a, threshold=0.9, seed=0)
    assert connectivity == pytest.approx(1.0) and labels is None  # |λ_1|/n = 1: whole at any α_t < 1
    connectivity, labels = part.cluster_split(np.eye(4), threshold=0.9, seed=0)
    assert connectivity == pytest.approx(0.25) and labels is not None and 0 < labels.sum() < 4
    reps = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    assert StoCFLMerges(0.5).merges(reps, np.ones(3, bool)) == [(0, [1])]
    assert StoCFLMerges(0.999).merges(reps, np.ones(3, bool)) == []
    d = np.array([[0, 1, 9, 9], [1, 0, 9, 9], [9, 9, 0, 1], [9, 9, 1, 0]], dtype=float)
    assert ThresholdGroups(2.0).groups(d).tolist() == [0, 0, 1, 1]
    assert TreeCut(num_clusters=2).groups(np.array([[0.0], [0.1], [5.0], [5.1]])).tolist() in ([0, 0, 1, 1],
                                                                                             [1, 1, 0, 0])
    updates = np.array([[1.0, 0.1, 0.0], [0.9, 0.0, 0.1], [0.0, 0.1, 1.0], [0.1, 0.0, 0.9]])
    labels = DirectionGroups(2).groups(updates, seed=0)
    assert labels[0] == labels[1] != labels[2] == labels[3]
    directions = np.stack([updates[labels == g].mean(0) for g in range(2)])
    assert DirectionGroups(2).newcomers(np.array([[0.0, 0.0, 1.0]]), directions).tolist() == [labels[2]]


def _host(value: torch.Tensor | np.ndarray) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else value


@pytest.mark.parametrize("method", ["stocfl", "fedrc", "hcfl", "cflgp"])
def test_declared_fields_are_what_a_checkpoint_holds(tmp_path: Path, method: str) -> None:
    """A method's checkpoint is the attributes its classes declare in ``saved``, and loading it back restores them
    (a cluster book as plain data)."""
    alg = _alg(tmp_path, [f"algorithm={method}"])
    alg.run_round(0, np.arange(8))
    state = alg.state_dict()
    assert set(state) == set(alg.saved_fields())
    fresh = _alg(tmp_path / "again", [f"algorithm={method}"])
    fresh.load_state_dict(state)
    again = fresh.state_dict()
    for key, value in state.items():
        if isinstance(value, torch.Tensor | np.ndarray):
            np.testing.assert_array_equal(_host(again[key]), _host(value), err_msg=key)
        elif isinstance(value, dict) and all(isinstance(v, torch.Tensor) for v in value.values()):
            for name in value:
                torch.testing.assert_close(again[key][name], value[name])
        elif not (isinstance(value, float) and np.isnan(value)):
            assert again[key] == value, key


@pytest.mark.parametrize("overrides,kept", [
    (["algorithm=fedem"], False),  # conditional formulation, client scope: nothing to keep
    (["algorithm=fedem", "algorithm.weights_scope=sample"], True),  # HCFL+'s sample-wise prior
    (["algorithm=fedrc"], True),  # fedrc-ratio's label counts
])
def test_server_statistics_are_kept_only_when_used(tmp_path: Path, overrides: list[str], kept: bool) -> None:
    alg = _alg(tmp_path, overrides)
    alg.run_round(0, np.arange(8))
    assert (alg.state.stats is not None) is kept
    assert ("counts" in alg.state_dict()) is kept
