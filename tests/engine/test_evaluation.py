"""Evaluation defects found in review: never-sampled clients, test-client weights fitted on scored labels."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.federation import Split
from fedcluster.engine.evaluation.holdout import scored_rows, with_fit_rows
from fedcluster.engine.evaluation.scores import client_scores, per_sample_losses
from fedcluster.engine.runner import Run
from fedcluster.tiers.weighting import best_cluster, em_weights


def _run(tmp_path: Path, *overrides: str) -> Run:
    cfg, typed = resolve(load_raw(None, ["progress=false", "threads=1", f"out={tmp_path / 'run'}", *overrides]))
    return Run(cfg, typed)


@pytest.mark.parametrize("method", ["fedem", "ifca"])
def test_never_sampled_clients_get_an_e_step_before_evaluation(method: str, tmp_path: Path) -> None:
    """S4 H.2: a client that never trained runs the E-step (soft) / picks the lowest-loss cluster (hard) on
    its labelled data before it is scored, and clients.csv says it never trained."""
    run = _run(tmp_path, f"algorithm={method}", "num_clients=12", "clients_per_round=3", "rounds=2",
               "lr=0.3", "local_epochs=2")
    run.execute()
    alg, tr = run.alg, run.fed.train
    trained = np.zeros(12, dtype=bool)
    for t in range(2):
        trained[run.stream[t]] = True
    assert 0 < trained.sum() < 12
    losses = alg.losses(np.arange(len(tr.y)))
    ll = alg.formulation.loglik(losses, tr.x, tr.y.cpu().numpy(), alg.state.stats)
    if method == "fedem":
        expected = em_weights(ll, tr.owner(), 12, alg.params.test_em_iters)[~trained]
        np.testing.assert_allclose(alg.scoring_omega()[~trained], expected, rtol=1e-5, atol=1e-6)
        assert not np.allclose(alg.scoring_omega()[~trained], 1 / 3)
    np.testing.assert_array_equal(alg.assignment()[~trained], best_cluster(ll, tr.owner(), 12)[~trained]
                                  if method == "ifca" else expected.argmax(1))
    assert len(set(alg.assignment()[~trained])) > 1 or method == "fedem"  # not everyone in cluster 0
    with (tmp_path / "run" / "clients.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["trained"]) for r in rows] == trained.astype(int).tolist()
    np.testing.assert_allclose(alg.omega[~trained], 1 / 3)  # the training state itself is untouched


def test_holdout_fits_on_one_half_and_scores_the_other() -> None:
    x = torch.zeros(9, 1)
    split = Split(x, torch.arange(9) % 2, np.array([0, 4, 8, 9]))
    held = with_fit_rows(split, "half", seed=0)
    assert held.fit.tolist().count(True) == 2 + 2 + 1
    scored = scored_rows(held)
    assert scored[:8].sum() == 4 and (held.fit[:8] != scored[:8]).all()
    assert scored[8] and held.fit[8]  # a one-sample client fits and scores its only sample
    assert with_fit_rows(split, "all", 0).fit is None
    # predictions right on the fit rows only: the scored accuracy ignores them
    pred = torch.zeros(9, 2)
    pred[torch.as_tensor(held.fit), split.y[torch.as_tensor(held.fit)]] = 1
    pred[torch.as_tensor(~held.fit), 1 - split.y[torch.as_tensor(~held.fit)]] = 1
    acc, _ = client_scores(pred, held, "classification")
    assert acc[:2].tolist() == [0.0, 0.0] and acc[2] == 1.0


def test_test_clients_choose_their_cluster_on_the_fit_half(tmp_path: Path) -> None:
    """A hard method picks a test client's cluster on the fit rows only: with test_fit=half the choice equals
    the lowest loss on those rows; test_fit=all (S4's reading) uses every row."""
    run = _run(tmp_path, "algorithm=ifca", "rounds=2", "lr=0.3", "num_clients=9")
    run.execute()
    test, alg = run.fed.test, run.alg
    assert test.fit is not None and 0 < test.fit.sum() < len(test.y)
    outputs = alg.outputs(test.x)
    half = np.asarray(alg.fit_weights(outputs, test)).argmax(1)
    part = test.rows(test.fit)

    losses = per_sample_losses(alg.outputs(part.x), part.y, "classification").T.double().cpu().numpy()
    np.testing.assert_array_equal(half, best_cluster(-losses, part.owner(), part.num_clients))
    run_all = _run(tmp_path / "all", "algorithm=ifca", "rounds=2", "lr=0.3", "num_clients=9", "test_fit=all")
    assert run_all.fed.test.fit is None


def test_fedrc_ft_global_accuracy_uses_the_averaged_fine_tuned_models(tmp_path: Path) -> None:
    """S4 H.5: FedRC-FT's global model is the average of the fine-tuned local models, so its global (test)
    accuracy differs from FedRC's (S4 Table 1), while training itself is unchanged."""
    common = ["algorithm=fedrc", "rounds=2", "lr=0.3", "local_epochs=2", "num_clients=9"]
    plain = _run(tmp_path / "plain", *common)
    tuned = _run(tmp_path / "ft", *common, "algorithm.ft=true")
    a, b = plain.execute(), tuned.execute()
    for n, v in plain.alg.models.items():  # fine-tuning is evaluation only
        torch.testing.assert_close(tuned.alg.models[n], v, rtol=0, atol=0)
    assert a["final"]["test_acc"] != b["final"]["test_acc"]
    assert a["final"]["val_acc"] != b["final"]["val_acc"]
    alg, test = tuned.alg, tuned.fed.test
    avg = alg.fine_tuned_average()
    sizes = torch.as_tensor(tuned.fed.train.sizes, dtype=torch.float32, device=tuned.device)
    name = next(iter(avg))
    expected = (alg.fine_tuned()[name] * (sizes / sizes.sum()).view(-1, *[1] * (avg[name].dim()))).sum(0)
    torch.testing.assert_close(avg[name], expected)
    outputs = alg.outputs(test.x, avg)
    w = torch.as_tensor(np.asarray(alg.fit_weights(outputs, test)), dtype=torch.float32, device=outputs.device)
    mixed = (w[torch.as_tensor(test.owner())].T.unsqueeze(-1) * outputs.softmax(-1)).sum(0)
    torch.testing.assert_close(alg.predict(test, False), mixed)


def test_a_fit_row_with_an_infinite_loss_does_not_turn_the_score_into_nan() -> None:
    """A diverging regression model's outputs (~1e35) square to inf in float32. The fit rows are not scored:
    they must be left out, not weighted by 0 (inf × 0 = NaN would hide the client's real score)."""
    split = Split(torch.zeros(4, 1), torch.zeros(4), np.array([0, 4]), fit=np.array([True, True, False, False]))
    pred = torch.tensor([[1e35], [1e35], [2.0], [4.0]])
    _, loss = client_scores(pred, split, "regression")
    assert loss.tolist() == [(4.0 + 16.0) / 2]
    acc, loss = client_scores(torch.tensor([[float("nan"), 0.0], [float("nan"), 0.0], [0.0, 1.0], [1.0, 0.0]]),
                              Split(torch.zeros(4, 1), torch.tensor([0, 0, 1, 1]), np.array([0, 4]),
                                    fit=np.array([True, True, False, False])), "classification")
    assert acc.tolist() == [0.5] and np.isfinite(loss).all()


def test_test_fit_90_10_fits_on_nine_tenths_and_scores_the_rest() -> None:
    """test_fit=90-10 (FedRC's public code): 90 % of each test client's rows fit the weights, 10 % are scored."""
    ptr = np.array([0, 100, 300, 301])
    split = Split(torch.zeros(301, 1), torch.zeros(301, dtype=torch.long), ptr)
    fit = with_fit_rows(split, "90-10", seed=0).fit
    assert [int(fit[a:b].sum()) for a, b in zip(ptr[:-1], ptr[1:], strict=True)] == [90, 180, 1]
    scored = scored_rows(with_fit_rows(split, "90-10", seed=0))
    assert [int(scored[a:b].sum()) for a, b in zip(ptr[:-1], ptr[1:], strict=True)] == [10, 20, 1]
    half = with_fit_rows(split, "half", seed=0).fit
    assert [int(half[a:b].sum()) for a, b in zip(ptr[:-1], ptr[1:], strict=True)] == [50, 100, 1]
