"""HCFL composition (tiers 1–4 from the config), HCFL+ / HCFL' / adaptive FedRC presets, eq. 8 splits, Alg. 5
removals, S4 Alg. 3 low-mass removal, checkpoints and the K^t plot."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.algorithms.hcfl import HCFL, HCFLParams
from fedcluster.algorithms.hcfl_presets import (
    FedRCAdaptiveParams,
    HCFLPlusParams,
    HCFLPrimeParams,
    composition_overrides,
    to_hcfl,
)
from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.params import num_units
from fedcluster.engine.runner import Run
from fedcluster.tiers.cluster_book import remove_weights
from fedcluster.tiers.cohort import segment_mean
from fedcluster.tiers.distance import ClientDistance, CohortView
from fedcluster.tracking.run_dir import RunDir

FAST = ["num_clients=8", "progress=false", "threads=1"]
SAME = ("val_acc", "test_acc", "ari", "num_clusters", "bytes_up", "bytes_down", "val_loss", "test_loss")


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "rounds.csv").open() as f:
        return list(csv.DictReader(f))


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]


def _on_simplex(w: np.ndarray) -> None:
    w = np.asarray(w, dtype=np.float64)
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)


def _check_state(state: dict, records: list[dict], hard: bool) -> None:
    """Models, Ω, γ, ω_{i,j;k}, F and the ids agree on K; every weight row is on the simplex."""
    k = num_units(state["models"])
    assert state["omega"].shape[1] == state["gamma"].shape[1] == k
    if "counts" in state:  # the statistics of a formulation that uses them (or of the sample scope)
        assert state["counts"].shape[1] == k
    assert state["book"]["ids"] == records[-1]["ids"] and len(set(records[-1]["ids"])) == k
    for key in ("omega", "gamma", "sample_prior"):
        if state.get(key) is not None:
            _on_simplex(state[key])
    if hard:
        assert set(np.unique(state["omega"])) <= {0.0, 1.0}
    assert [e for r in records for e in r["events"]] == state["book"]["events"]


COMBOS = {  # tiers 1/2 × 3/4
    "fedrc-ratio+soft-em+split-remove+cscp": ["algorithm.formulation=fedrc-ratio", "algorithm.weights=soft-em",
                                              "algorithm.adaptive=split-remove", "algorithm.distance=prototype-cscp",
                                              "algorithm.rho=0.3"],
    "hard-distance+split+ascp": ["algorithm.weights=hard-distance", "algorithm.adaptive=split",
                                 "algorithm.distance=prototype-ascp", "algorithm.rho=0"],
    "hard-loss+cfl+full-models": ["algorithm.weights=hard-loss", "algorithm.adaptive=cfl", "algorithm.split=false",
                                  "algorithm.distance=update-cosine", "algorithm.tol1=100", "algorithm.tol2=0",
                                  "algorithm.min_size=2"],
    "joint+client-em+low-mass": ["algorithm.formulation=joint", "algorithm.weights_scope=client",
                                 "algorithm.adaptive=low-mass", "algorithm.num_clusters=3", "algorithm.delta=0.34"],
    "fedsoft+gradient+no-scwu": ["algorithm.weights=fedsoft", "algorithm.prox=0.1", "algorithm.scwu=false",
                                 "algorithm.distance=update-cosine", "algorithm.confidence=false", "algorithm.rho=0"],
    "full-models+cscp-mean+mu": ["algorithm.split=false", "algorithm.distance=prototype-cscp", "algorithm.reduce=mean",
                                 "algorithm.mu_tilde=0.4", "algorithm.rho=0"],
    "l2+partial": ["algorithm.distance=parameter-l2", "algorithm.num_clusters=2", "algorithm.rho=0",
                   "clients_per_round=0.5"],
}


@pytest.mark.parametrize("name", sorted(COMBOS))
def test_composition_from_config(tmp_path: Path, name: str) -> None:
    out = tmp_path / "run"
    assert main(["run", "algorithm=hcfl", *COMBOS[name], *FAST, "rounds=2", f"out={out}"]) == 0
    rows, records = _rows(out), _records(out)
    assert len(rows) == 2 and [r["round"] for r in records] == [1, 2]
    for r, rec in zip(rows, records, strict=True):
        assert int(r["num_clusters"]) == len(rec["ids"]) == len(rec["concept"]["mass"])
        assert {"splits", "merges", "removals", "split_gap"} <= set(r) and int(r["bytes_up"]) > 0
    state = RunDir(out).load_checkpoint()["algorithm"]
    _check_state(state, records, hard="hard-" in name)
    if name != "fedrc-ratio+soft-em+split-remove+cscp":  # ρ = 0 / permissive tolerances / δ > 1/K: K^t changes
        assert any(e["kind"] in ("split", "remove") for rec in records for e in rec["events"])


FIXED = {  # the named fixed-K methods are compositions with adaptive=fixed
    "fedrc": ["algorithm.formulation=fedrc-ratio", "algorithm.weights_scope=client"],
    "fedem": ["algorithm.weights_scope=sample", "algorithm.mu_tilde=0.4"],
    "fesem": ["algorithm.weights=hard-distance"],
    "ifca": ["algorithm.weights=hard-loss"],
}


@pytest.mark.parametrize("method", sorted(FIXED))
def test_named_fixed_k_methods_are_compositions(tmp_path: Path, method: str) -> None:
    own = ["algorithm.weights_scope=sample", "algorithm.mu_tilde=0.4"] if method == "fedem" else []
    common = [*FAST, "rounds=3", "algorithm.num_clusters=3", "algorithm.split=true"]
    assert main(["run", f"algorithm={method}", *own, *common, f"out={tmp_path / 'named'}"]) == 0
    assert main(["run", "algorithm=hcfl", "algorithm.adaptive=fixed", *FIXED[method], *common,
                 f"out={tmp_path / 'hcfl'}"]) == 0
    a, b = _rows(tmp_path / "named"), _rows(tmp_path / "hcfl")
    for key in SAME:
        assert [r[key] for r in a] == [r[key] for r in b], key


PRESETS = [("hcfl-plus", HCFLPlusParams(backbone="fedrc", rho=0.02),
            ["algorithm.backbone=fedrc", "algorithm.rho=0.02"]),
           ("hcfl-plus", HCFLPlusParams(backbone="fesem", rho=0.0), ["algorithm.backbone=fesem", "algorithm.rho=0"]),
           ("hcfl-plus", HCFLPlusParams(backbone="fedsoft", rho=0.0, scwu=False),
            ["algorithm.backbone=fedsoft", "algorithm.rho=0", "algorithm.scwu=false"]),
           ("hcfl-prime", HCFLPrimeParams(backbone="fedem", tol1=100, tol2=0, warmup=0, min_size=2),
            ["algorithm.backbone=fedem", "algorithm.tol1=100", "algorithm.tol2=0", "algorithm.warmup=0",
             "algorithm.min_size=2"]),
           ("fedrc-adaptive", FedRCAdaptiveParams(num_clusters=4, delta=0.26),
            ["algorithm.num_clusters=4", "algorithm.delta=0.26"])]


@pytest.mark.parametrize("name,params,args", PRESETS, ids=[f"{p[0]}-{i}" for i, p in enumerate(PRESETS)])
def test_presets_equal_their_composition(tmp_path: Path, name: str, params, args: list[str]) -> None:
    assert main(["run", f"algorithm={name}", *args, *FAST, "rounds=3", f"out={tmp_path / 'preset'}"]) == 0
    assert main(["run", "algorithm=hcfl", *composition_overrides(params), *FAST, "rounds=3",
                 f"out={tmp_path / 'hcfl'}"]) == 0
    a, b = _rows(tmp_path / "preset"), _rows(tmp_path / "hcfl")
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in a] == \
           [{k: v for k, v in r.items() if k != "seconds"} for r in b]
    assert _records(tmp_path / "preset") == _records(tmp_path / "hcfl")
    assert any(e for rec in _records(tmp_path / "preset") for e in rec["events"])  # K^t changed


def test_preset_readings() -> None:
    plus = {b: to_hcfl(HCFLPlusParams(backbone=b)) for b in ("fesem", "fedem", "fedrc", "fedsoft")}
    assert plus["fedrc"].distance == "prototype-cscp" and plus["fedrc"].mu_tilde == 0.4  # E.1-24, E.1-12
    assert plus["fedem"].distance == "prototype-ascp" and plus["fedem"].mu_tilde == 0.0
    assert plus["fesem"].weights == "hard-distance" and plus["fesem"].weights_scope == "client"  # E.1-25
    assert plus["fedsoft"].prox == 0.1 and plus["fedsoft"].weights == "soft-em"
    assert all(p.split and p.adaptive == "split-remove" and p.num_clusters == 1 for p in plus.values())
    prime = to_hcfl(HCFLPrimeParams(backbone="fedrc"))
    assert (prime.adaptive, prime.distance, prime.scwu, prime.split) == ("cfl", "update-cosine", False, True)
    assert to_hcfl(HCFLPlusParams(distance="update-cosine")).distance == "update-cosine"  # Table 2 ①
    with pytest.raises(ValueError, match="rho"):
        HCFLParams(rho=-1)


# -- constructed cases ----------------------------------------------------------------------------------
def _alg(tmp_path: Path, overrides: list[str]) -> HCFL:
    cfg, typed = resolve(load_raw(None, [*FAST, "rounds=1", f"out={tmp_path / 'x'}", *overrides]))
    return Run(cfg, typed).alg  # type: ignore[return-value]


class _BlockDistance(ClientDistance):
    """d̃ = 2·gap between clients {0..3} and {4..7}, 0 inside: max − mean (diagonal included) = gap exactly."""

    def __init__(self, gap: float) -> None:
        self.gap = gap

    def matrix(self, view: CohortView) -> np.ndarray:
        d = np.zeros((8, 8))
        d[:4, 4:] = d[4:, :4] = 2 * self.gap
        return d


@pytest.mark.parametrize("rho,strict,splits", [(0.2, False, True), (0.25, False, True), (0.25, True, False),
                                               (0.3, False, False)])
def test_split_exactly_when_the_eq8_gap_reaches_rho(tmp_path: Path, monkeypatch, rho, strict, splits) -> None:
    alg = _alg(tmp_path, ["algorithm=hcfl", "algorithm.formulation=fedrc-ratio", f"algorithm.rho={rho}",
                          f"algorithm.strict={str(strict).lower()}"])
    monkeypatch.setattr(alg, "adaptation", dataclasses.replace(alg.adaptation, distance=_BlockDistance(0.25)))
    res = alg.run_round(0, np.arange(8))
    assert res.extra["split_gap"] == 0.25
    if not splits:
        assert alg.num_clusters == 1 and res.extra["splits"] == 0
        return
    assert alg.num_clusters == 2 and alg.book.ids == [0, 1] and res.extra["splits"] == 1
    event = alg.book.events[0]
    assert (event.kind, event.cluster, event.others, event.clients) == ("split", 0, (1,), (4, 5, 6, 7))
    np.testing.assert_allclose(alg.omega, 0.5)  # Alg. 4 lines 8–9: ω̃ halved for every client ...
    np.testing.assert_allclose(alg.sample_prior, 0.5)  # ... and lines 6–7 for every sample
    np.testing.assert_array_equal(alg.counts[:, 1], alg.counts[:, 0])  # lines 3–4: F copied
    for name, v in alg.models.items():  # one shared φ, two heads from the two parts
        if name.startswith("body."):
            torch.testing.assert_close(v[0], v[1], rtol=0, atol=0)
        else:
            assert not torch.equal(v[0], v[1])
    assert res.clusters is not None and res.clusters["ids"] == [0, 1]


def test_split_without_scwu_and_with_hard_weights_reassigns(tmp_path: Path, monkeypatch) -> None:
    for extra in (["algorithm.scwu=false"], ["algorithm.weights=hard-distance"]):
        alg = _alg(tmp_path, ["algorithm=hcfl", "algorithm.rho=0.1", *extra])
        monkeypatch.setattr(alg, "adaptation", dataclasses.replace(alg.adaptation, distance=_BlockDistance(0.25)))
        alg.run_round(0, np.arange(8))
        np.testing.assert_array_equal(alg.omega, np.repeat(np.eye(2), 4, 0))  # C_{k*,1} → k*, C_{k*,2} → new
        _on_simplex(alg.gamma)
        if alg.sample_prior is not None:
            _on_simplex(alg.sample_prior)
    np.testing.assert_array_equal(alg.assigned, [0, 0, 0, 0, 1, 1, 1, 1])


def test_removal_of_a_cluster_nobody_weights_highest(tmp_path: Path) -> None:
    alg = _alg(tmp_path, ["algorithm=hcfl", "algorithm.num_clusters=3", "algorithm.rho=10", "algorithm.mu_tilde=0.3"])
    before = np.tile([0.6, 1e-6, 0.4 - 1e-6], (8, 1))
    before[6] = [0.2, 0.3, 0.5]  # an unsampled client with mass on cluster 1, not its largest
    alg.omega = before.copy()
    prior = alg.sample_prior.copy()
    alg.run_round(0, np.arange(4))  # clients 4..7 are not sampled
    assert alg.num_clusters == 2 and alg.book.ids == [0, 2] and num_units(alg.models) == 2
    assert [(e.kind, e.cluster) for e in alg.book.events] == [("remove", 1)]
    np.testing.assert_allclose(alg.omega[4:], remove_weights(before[4:], 1))  # Alg. 5 line 6 (ω̃)
    rows = np.arange(alg.ctx.fed.train.ptr[4], alg.ctx.fed.train.ptr[8])
    np.testing.assert_allclose(alg.sample_prior[rows], remove_weights(prior[rows], 1), rtol=1e-6)  # line 5
    for w in (alg.omega, alg.gamma, alg.sample_prior):
        _on_simplex(w)
    assert alg.counts.shape[1] == 2


def test_adaptive_fedrc_removes_a_low_mass_model(tmp_path: Path) -> None:
    alg = _alg(tmp_path, ["algorithm=fedrc-adaptive", "algorithm.num_clusters=3"])
    assert (alg.params.formulation, alg.params.adaptive, alg.params.delta) == ("fedrc-ratio", "low-mass", 0.05)
    alg.omega = np.tile([0.5, 0.5 - 1e-6, 1e-6], (8, 1))
    alg.run_round(0, np.arange(8))
    assert alg.num_clusters == 2 and alg.book.ids == [0, 1]
    assert [(e.kind, e.cluster) for e in alg.book.events] == [("remove", 2)]
    _on_simplex(alg.gamma)
    tr = alg.ctx.fed.train
    np.testing.assert_allclose(alg.omega, segment_mean(alg.gamma.astype(np.float64), tr.owner(), 8))  # S4 Alg. 3
    assert num_units(alg.models) == 2 and alg.marginal.shape[0] == 2


@pytest.mark.parametrize("backbone", ["fedrc", "fesem"])
def test_hcfl_plus_resume_equals_straight_run(tmp_path: Path, backbone: str) -> None:
    common = ["algorithm=hcfl-plus", f"algorithm.backbone={backbone}", "algorithm.rho=0", *FAST, "checkpoint_every=1"]
    assert main(["run", *common, "rounds=3", f"out={tmp_path / 'straight'}"]) == 0
    assert main(["run", *common, "rounds=2", f"out={tmp_path / 'resumed'}"]) == 0
    assert main(["resume", str(tmp_path / "resumed"), "rounds=3"]) == 0
    a, b = _rows(tmp_path / "straight"), _rows(tmp_path / "resumed")
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in a] == \
           [{k: v for k, v in r.items() if k != "seconds"} for r in b]
    assert _records(tmp_path / "straight") == _records(tmp_path / "resumed")
    assert len({r["num_clusters"] for r in a}) > 1  # K^t changed on the way


def test_report_plots_k_over_rounds(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["run", "algorithm=hcfl-plus", "algorithm.rho=0", *FAST, "rounds=3", f"out={out}"]) == 0
    assert main(["report", str(out)]) == 0
    assert (out / "num_clusters.png").stat().st_size > 0


def test_prototype_distance_needs_labels(tmp_path: Path) -> None:
    assert main(["run", "algorithm=hcfl", "dataset=mixed-regression", "scenario=mixed-regression", "model=linear",
                 *FAST, "rounds=1", f"out={tmp_path / 'r'}"]) == 2


# -- behaviour (slow) ------------------------------------------------------------------------------------
CONCEPTS = ["dataset=digits", "scenario=concept-swap", "rounds=100", "local_epochs=5", "lr=0.3", "eval_every=10",
            "progress=false", "threads=1"]


@pytest.mark.slow
def test_adaptive_fedrc_finds_the_number_of_concepts(tmp_path: Path) -> None:
    """S4 Fig. 7: started with 6 models on 3 concepts, adaptive FedRC removes the low-mass ones down to 3."""
    assert main(["run", "algorithm=fedrc-adaptive", *CONCEPTS, f"out={tmp_path / 'a'}"]) == 0
    last = _rows(tmp_path / "a")[-1]
    assert int(last["num_clusters"]) == 3 and float(last["ari"]) > 0.9


@pytest.mark.slow
def test_hcfl_plus_rho_controls_the_number_of_clusters(tmp_path: Path) -> None:
    """S1 Table 1 / Fig. 4 shape: HCFL+(FedRC) with ρ = 0.3 splits one cluster into the 3 concepts; ρ = 0.05 more."""
    k = {}
    for rho in (0.05, 0.3):
        out = tmp_path / f"rho{rho}"
        assert main(["run", "algorithm=hcfl-plus", "algorithm.backbone=fedrc", f"algorithm.rho={rho}", *CONCEPTS,
                     f"out={out}"]) == 0
        last = _rows(out)[-1]
        k[rho] = int(last["num_clusters"])
        if rho == 0.3:
            assert k[rho] == 3 and float(last["ari"]) > 0.9
    assert k[0.05] > k[0.3]
