"""FL+HC, FedGroup, FedGWC and CLoVE: the behaviour each paper predicts, over three seeds, on small digits
federations (8×8 images, one MLP, CPU); their records, checkpoints and resume; partial participation; two ranks and
a Flower simulation giving the single-process rounds.

Thresholds come from measured statistics (seeds 0–2):
- FL+HC: Ward linkage heights of the round-2 updates on two label-map concepts: top merge 0.49–0.59, the one
  below 0.24–0.36; on one concept (iid) every merge ≤ 0.27. A threshold of 0.4 separates the two cases.
- FedGWC: on 40 clients (a 3:1 majority/minority concept split, a quarter sampled per round) the interaction
  matrix's running mean squared change (per-step loss trajectories, scaled to the paper's 100 clients) falls to
  ≈ 5e-5 by round 40 and ≈ 2e-5 by round 80; it passes the paper's ε = 1e-5 and splits at rounds 107, 115, 109.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from fedcluster.app.cli import main
from fedcluster.engine.params import num_units
from fedcluster.engine.runner import Run
from fedcluster.tracking.run_dir import RunDir
from tests.support.method_runs import played

SEEDS = [0, 1, 2]
BASE = ["progress=false", "threads=1", "checkpoint_every=1000"]
TWO_CONCEPTS = ["scenario=concept-swap", "scenario.concepts=2", "scenario.alpha=10", "num_clients=8"]
IID = ["scenario=iid", "num_clients=8"]
# a 3:1 majority / minority concept split, a quarter of 40 clients per round (FedGWC's setting: partial participation)
MINORITY = ["scenario=concept-swap", "scenario.concepts=2", "scenario.alpha=10", "scenario.ratios=[3,1]",
            "num_clients=40", "clients_per_round=0.25"]


def _run(tmp_path: Path, overrides: list[str], rounds: int) -> Run:
    return played(tmp_path, [*BASE, *overrides], rounds)


def _ari(run: Run, assignment: np.ndarray | None = None) -> float:
    got = run.alg.assignment() if assignment is None else assignment
    return float(adjusted_rand_score(run.fed.true_cluster, got))


# -- FL+HC -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_flhc_separates_two_concepts_by_the_threshold(tmp_path: Path, seed: int) -> None:
    """FL+HC paper Sec. IV: clustering the updates to the global model separates clients whose data differ."""
    run = _run(tmp_path, ["algorithm=flhc", "algorithm.cluster_round=2", "algorithm.distance_threshold=0.4",
                          *TWO_CONCEPTS, f"seed={seed}"], rounds=4)
    assert run.alg.num_clusters == 2 and _ari(run) == 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_flhc_keeps_one_concept_whole(tmp_path: Path, seed: int) -> None:
    run = _run(tmp_path, ["algorithm=flhc", "algorithm.cluster_round=2", "algorithm.distance_threshold=0.4", *IID,
                          f"seed={seed}"], rounds=3)
    assert run.alg.num_clusters == 1


def test_flhc_is_fedavg_until_the_clustering_round(tmp_path: Path) -> None:
    flhc = _run(tmp_path / "a", ["algorithm=flhc", "algorithm.cluster_round=3", *TWO_CONCEPTS], rounds=3)
    fedavg = _run(tmp_path / "b", ["algorithm=fedavg", *TWO_CONCEPTS], rounds=3)
    # FedAvg adds each vectorised call's models to its sum as the call finishes; FL+HC keeps every client's model
    # (it clusters them) and averages them at once. The two sums run in different orders, and a CPU's kernels may
    # round each shape differently, so the models agree to float32 rounding, not bit for bit on every machine.
    for name, v in fedavg.alg.models.items():
        np.testing.assert_allclose(flhc.alg.models[name].cpu().numpy(), v.cpu().numpy(), rtol=1e-5, atol=1e-6)


# -- FedGroup ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_fedgroup_groups_the_concepts_at_its_cold_start(tmp_path: Path, seed: int) -> None:
    """FedGroup Sec. IV-B: K-means on the decomposed cosines (EDC) of pre-trained updates finds the groups."""
    run = _run(tmp_path, ["algorithm=fedgroup", "algorithm.num_groups=2", *TWO_CONCEPTS, f"seed={seed}"], rounds=1)
    assert run.alg.grouped.all() and _ari(run) == 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_fedgroup_cold_starts_newcomers_into_their_concept(tmp_path: Path, seed: int) -> None:
    """Only α·K = 4 of 16 clients form the groups; the others arrive later under partial participation and join the
    group whose cold-start direction is closest to their own pre-trained update (FedGroup Sec. IV-C)."""
    run = _run(tmp_path, ["algorithm=fedgroup", "algorithm.num_groups=2", "algorithm.pretrain_scale=2",
                          *TWO_CONCEPTS, "num_clients=16", "clients_per_round=0.5", f"seed={seed}"], rounds=6)
    assert run.alg.grouped.sum() >= 12
    grouped = run.alg.grouped
    got = run.alg.cluster[grouped]
    assert adjusted_rand_score(run.fed.true_cluster[grouped], got) == 1.0


def test_fedgroup_inter_group_aggregation_pulls_the_groups_together(tmp_path: Path) -> None:
    def spread(inter_lr: float) -> float:
        run = _run(tmp_path / str(inter_lr), ["algorithm=fedgroup", "algorithm.num_groups=2",
                                              f"algorithm.inter_lr={inter_lr}", *TWO_CONCEPTS], rounds=3)
        flat = np.concatenate([v.reshape(2, -1).cpu().numpy() for v in run.alg.models.values()], axis=1)
        return float(np.linalg.norm(flat[0] - flat[1]))

    assert spread(0.5) < spread(0.0)


# -- FedGWC --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_fedgwc_gives_minority_clients_lower_gaussian_weights(tmp_path: Path, seed: int) -> None:
    """FedGWC Sec. 3.2 (Fig. 1): a client whose loss lies outside the cohort's band earns a lower reward, so its
    row of the interaction matrix (its Gaussian weights) stays below the majority's."""
    run = _run(tmp_path, ["algorithm=fedgwc", *MINORITY, f"seed={seed}"], rounds=40)
    assert run.alg.num_clusters == 1  # ε = 1e-5 is not reached: no split, one matrix over all clients
    weight = run.alg.interaction[0].sum(1)
    truth = run.fed.true_cluster
    minority = np.bincount(truth).argmin()
    assert weight[truth == minority].mean() < 0.7 * weight[truth != minority].mean()


@pytest.mark.parametrize("seed", SEEDS)
def test_fedgwc_splits_off_the_minority_concept(tmp_path: Path, seed: int) -> None:
    """At the paper's ε = 1e-5, once the interaction matrix has converged, spectral clustering splits the minority
    concept off (measured: split at rounds 107–115, ARI 1.0 on seeds 0–2)."""
    run = _run(tmp_path, ["algorithm=fedgwc", *MINORITY, f"seed={seed}"], rounds=125)
    assert run.alg.num_clusters == 2 and _ari(run) >= 0.9
    assert [e.kind for e in run.alg.book.events] == ["split"]


# -- CLoVE ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_clove_recovers_the_concepts_from_random_models(tmp_path: Path, seed: int) -> None:
    """CLoVE Sec. 3–4: loss vectors over K̂ = 3 randomly initialised models, clustered with K^t by the Ward search
    and matched to models, recover the two concepts within a few rounds; assignments then stay put."""
    run = _run(tmp_path, ["algorithm=clove", "algorithm.num_clusters=3", "algorithm.route=ward", *TWO_CONCEPTS,
                          f"seed={seed}"], rounds=6)
    assert _ari(run) == 1.0 and len(np.unique(run.alg.model_of)) == 2
    assert run.alg.converged


# -- records, checkpoints, resume, partial participation ---------------------------------------------------
FAST = ["num_clients=8", "progress=false", "threads=1"]
METHODS = {
    "flhc": ["algorithm.cluster_round=1", "algorithm.distance_threshold=0.3"],
    "fedgroup": ["algorithm.num_groups=2"],
    # splits at once (half the clients per round: FedGWC splits only under partial participation)
    "fedgwc": ["algorithm.eps=1", "algorithm.patience=1", "algorithm.min_cluster_size=3", "clients_per_round=0.5"],
    "clove": ["algorithm.num_clusters=3"],
}


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "rounds.csv").open() as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_runs_records_and_resumes(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    assert main(["run", f"algorithm={name}", *METHODS[name], "rounds=2", *FAST, f"out={out}"]) == 0
    assert main(["resume", str(out), "rounds=3"]) == 0
    full = tmp_path / f"{name}-full"
    assert main(["run", f"algorithm={name}", *METHODS[name], "rounds=3", *FAST, f"out={full}"]) == 0
    assert _rows(out) == _rows(full)  # resume = one run
    records = [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]
    assert [r["round"] for r in records] == [1, 2, 3]
    state = RunDir(out).load_checkpoint()["algorithm"]
    assert num_units(state["models"]) == state["omega"].shape[1]
    rows = _rows(out)
    if name == "fedgwc":
        assert {"was", "was_db", "mse"} <= set(rows[0]) and any(int(r["splits"]) for r in rows)
    if name == "clove":
        assert {"clusters_found", "stable"} <= set(rows[0])


@pytest.mark.parametrize("name", sorted(METHODS))
def test_partial_participation_keeps_clusters_consistent(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    assert main(["run", f"algorithm={name}", *METHODS[name], "rounds=4", "num_clients=10", "clients_per_round=0.5",
                 "progress=false", "threads=1", f"out={out}"]) == 0
    state = RunDir(out).load_checkpoint()["algorithm"]
    k = num_units(state["models"])
    assert state["omega"].shape == (10, k)
    if "cluster" in state:
        assert state["cluster"].max() < k


def test_bad_parameters_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for item in ["algorithm=flhc algorithm.linkage=ward algorithm.metric=cosine",
                 "algorithm=fedgroup algorithm.num_groups=0", "algorithm=fedgwc algorithm.beta=0",
                 "algorithm=clove algorithm.num_clusters=1"]:
        assert main(["run", *item.split(), *FAST, "rounds=1"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "algorithm" in err, err


# -- two ranks and Flower ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_ranks_give_the_single_process_rounds(tmp_path: Path) -> None:
    from tests.engine.test_distributed import _check  # the ranks=2 harness (children, ports, comparison)

    _check(tmp_path, {name: ["num_clients=6", "rounds=3", "progress=false", "model.hidden=[16]", "threads=1",
                             "checkpoint_every=2", f"algorithm={name}", *METHODS[name]] for name in METHODS})


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(METHODS))
def test_flower_simulation_equals_in_process(tmp_path: Path, name: str) -> None:
    base = [f"algorithm={name}", *METHODS[name], "dataset=digits", "num_clients=6", "rounds=3", "model=mlp",
            "model.hidden=[16]", "progress=false"]
    assert main(["flower", "simulate", *base, f"out={tmp_path / 'sim'}"]) == 0
    assert main(["run", *base, f"out={tmp_path / 'local'}"]) == 0
    for a, b in zip(_rows(tmp_path / "sim"), _rows(tmp_path / "local"), strict=True):
        for key in ("val_acc", "test_acc", "ari", "num_clusters"):
            assert float(a[key]) == pytest.approx(float(b[key]), abs=1e-5), key
