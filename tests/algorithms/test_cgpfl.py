"""cgpfl: its personalised models stay near their context's generalised model as λ grows, each participating
client predicts with its own personalised model, it recovers the contexts of the federations its paper evaluates
(groups of clients with disjoint label sets; a two-concept label swap) on three seeds, it resumes to the rounds of
an uninterrupted run, and a bad λ is one line."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

import fedcluster
from fedcluster.app.cli import main
from fedcluster.engine.params import flatten
from fedcluster.errors import ConfigError
from tests.support.method_runs import label_groups, played

SEEDS = [0, 1, 2]
BASE = ["num_clients=12", "progress=false", "threads=1", "checkpoint_every=1000", "algorithm=cgpfl"]
DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
GROUPS = ((0, 1, 2), (3, 4, 5), (6, 7, 8, 9))  # each group of clients holds its own digits


@pytest.mark.parametrize("seed", SEEDS)
def test_cgpfl_recovers_client_groups_with_disjoint_labels(tmp_path: Path, seed: int) -> None:
    run = played(tmp_path, [*BASE, "algorithm.num_clusters=3", f"seed={seed}"], rounds=3,
                 fed=label_groups(seed, GROUPS))
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_cgpfl_recovers_two_label_swap_concepts(tmp_path: Path, seed: int) -> None:
    run = played(tmp_path, [*BASE, "num_clients=8", "algorithm.num_clusters=2", "scenario=concept-swap",
                            "scenario.concepts=2", "scenario.alpha=10", f"seed={seed}"], rounds=3)
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


def _spread(tmp_path: Path, lam: float) -> float:
    """Mean distance of the personalised models from their context's generalised model after two rounds with
    a tiny β (the generalised models stay at θ^0, where every client started; the first round has no λ)."""
    run = played(tmp_path / str(lam), [*BASE, "algorithm.num_clusters=3", f"algorithm.lam={lam}", "global_lr=1e-9"],
                 rounds=2, fed=label_groups(0, GROUPS))
    personal, context = flatten(run.alg.personal), flatten(run.alg.models)[run.alg.assigned]
    return float((personal - context).norm(dim=1).mean())


def test_a_larger_lambda_keeps_the_personalised_models_nearer_their_context(tmp_path: Path) -> None:
    free, held = _spread(tmp_path, 0.0), _spread(tmp_path, 20.0)
    assert free > 0 and held < 0.5 * free


def test_the_first_round_trains_without_the_proximal_term(tmp_path: Path) -> None:
    """No context exists before the first matching (every generalised model is θ^0): the first round trains
    plainly, as the WeCFL authors' proximal variant does, so its personalised models are WeCFL's local models."""
    held = played(tmp_path / "held", [*BASE, "algorithm.num_clusters=3", "algorithm.lam=20"], rounds=1,
                  fed=label_groups(0, GROUPS))
    free = played(tmp_path / "free", [*BASE, "algorithm.num_clusters=3", "algorithm.lam=0"], rounds=1,
                  fed=label_groups(0, GROUPS))
    for n, v in free.alg.personal.items():
        np.testing.assert_array_equal(held.alg.personal[n].cpu().numpy(), v.cpu().numpy())


@pytest.mark.parametrize("seed", SEEDS)
def test_cgpfl_finds_the_demo_concepts_at_its_defaults(tmp_path: Path, seed: int) -> None:
    """The digits demo (label skew and three concepts): a proximal first round followed the label skew (ARI about
    0 on seeds 0 and 2); the plain first round finds the concepts, which the later rounds keep."""
    run = played(tmp_path, [*BASE, f"seed={seed}"], rounds=4, config=DEMO)
    assert adjusted_rand_score(run.fed.true_cluster, run.alg.assigned) == 1.0


def test_participating_clients_predict_with_their_personalised_models(tmp_path: Path) -> None:
    run = played(tmp_path, [*BASE, "algorithm.num_clusters=3"], rounds=2, fed=label_groups(0, GROUPS))
    alg, split = run.alg, run.fed.train
    outputs, _ = alg.prediction(split, participating=True)
    client = int(np.flatnonzero(alg.has_personal)[0])
    rows = torch.as_tensor(np.flatnonzero(split.owner() == client), device=split.x.device)
    own = alg.outputs(split.x[rows], {n: v[client:client + 1] for n, v in alg.personal.items()})
    assert torch.allclose(outputs.reshape(-1, outputs.shape[-1])[rows], own.reshape(len(rows), -1), atol=1e-5)
    right = outputs.reshape(-1, outputs.shape[-1]).argmax(-1) == split.y  # the personalised models fit their data
    assert float(right.float().mean()) > 0.5  # θ^0 (no personalised model kept) scores about 0.07


def test_a_negative_lambda_is_refused() -> None:
    with pytest.raises(ConfigError, match="lam must be >= 0"):
        fedcluster.load_config(algorithm={"name": "cgpfl", "lam": -1})


def _rounds(out: Path) -> list[dict[str, str]]:
    with open(out / "rounds.csv", newline="") as fh:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(fh)]


def test_a_resumed_run_gives_the_rounds_of_an_uninterrupted_one(tmp_path: Path) -> None:
    common = ["algorithm=cgpfl", "num_clients=8", "clients_per_round=4", "progress=false", "threads=1",
              "checkpoint_every=1"]
    assert main(["run", *common, "rounds=2", f"out={tmp_path / 'part'}"]) == 0
    assert main(["resume", str(tmp_path / "part"), "rounds=4"]) == 0
    assert main(["run", *common, "rounds=4", f"out={tmp_path / 'full'}"]) == 0
    assert _rounds(tmp_path / "part") == _rounds(tmp_path / "full")
