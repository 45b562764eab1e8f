"""The FedRC paper's Table 4 personalised baselines, each against what its paper says it does, over three seeds:
local-only training communicates nothing (a client's model is what training alone gives, whatever the others hold);
APFL's mixing weight α_i moves toward the local model under strong label shift, and its global model is FedAvg's;
pFedMe's personalised models beat its global model on a label-shift federation.

All on digits (8×8), 8 clients, an MLP, CPU; the label shift is two classes per client."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.data.federation import Federation
from fedcluster.engine.round_evaluation import evaluate
from fedcluster.engine.runner import Run
from tests.support.method_runs import played

SEEDS = [0, 1, 2]
BASE = ["num_clients=8", "progress=false", "threads=1", "checkpoint_every=1000", "lr=0.05", "device=cpu"]
TWO_CLASSES = ["scenario=label-skew", "scenario.split=classes", "scenario.classes_per_client=2"]
IID = ["scenario=iid"]


def _run(tmp_path: Path, overrides: list[str], rounds: int, fed: Federation | None = None) -> Run:
    return played(tmp_path, [*BASE, *overrides], rounds, fed=fed)


def _val_accuracy(run: Run, models: dict[str, torch.Tensor] | None = None) -> float:
    """Mean over clients of the validation accuracy with each client's personalised model (``models``: one model
    [1, ...] for every client instead)."""
    if models is None:
        return evaluate(run.alg, run.fed)[0]["val_acc"]
    val = run.fed.val
    pred = run.alg.outputs(val.x, models)[0].argmax(1).cpu().numpy()
    right = pred == val.y.cpu().numpy()
    return float(np.mean([right[val.ptr[i]:val.ptr[i + 1]].mean() for i in range(val.num_clients)]))


# -- local-only training ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_local_only_is_training_alone(tmp_path: Path, seed: int) -> None:
    """Client 0's model is bitwise the same when every other client's labels are scrambled (nothing reaches it from
    them), nothing is sent, and test clients predict with the N_i-weighted average of the clients' models."""
    first = _run(tmp_path / "a", ["algorithm=local", *TWO_CLASSES, f"seed={seed}"], rounds=3)
    fed = copy.deepcopy(first.fed)
    lo = int(fed.train.ptr[1])
    fed.train.y[lo:] = torch.from_numpy(np.random.default_rng(seed).permutation(fed.train.y[lo:].numpy()))
    second = _run(tmp_path / "b", ["algorithm=local", *TWO_CLASSES, f"seed={seed}"], rounds=3, fed=fed)
    for name, v in first.alg.personal.items():
        assert torch.equal(v[0], second.alg.personal[name][0]), name
        assert not torch.equal(v[1:], second.alg.personal[name][1:]), name  # the scrambled clients did change
    rows = [r for r in first.dir.read_rounds()]
    assert all(float(r["bytes_up"]) == 0 and float(r["bytes_down"]) == 0 for r in rows)
    sizes = torch.as_tensor(first.fed.train.sizes, dtype=torch.float64)
    for name, v in first.alg.personal.items():
        mean = torch.einsum("m,m...->...", sizes / sizes.sum(), v.double()).float()
        torch.testing.assert_close(first.alg.models[name][0], mean)
    # personal models fit their two classes far better than their average does
    assert _val_accuracy(first) > _val_accuracy(first, first.alg.models) + 0.3


# -- APFL ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_apfl_alpha_moves_toward_the_local_model_under_label_shift(tmp_path: Path, seed: int) -> None:
    """APFL paper §5: α_i* weights the local model more the farther client i's distribution is from the
    federation's. With two classes per client every α_i rises from 0.5 toward 1; with iid clients none does."""
    shifted = _run(tmp_path / "s", ["algorithm=apfl", *TWO_CLASSES, f"seed={seed}"], rounds=5).alg.alpha
    iid = _run(tmp_path / "i", ["algorithm=apfl", *IID, f"seed={seed}"], rounds=5).alg.alpha
    assert shifted.min() > 0.8, shifted  # seeds 0-2: 0.84-1.0
    assert iid.max() < 0.55, iid  # seeds 0-2: 0.46-0.48


def test_apfl_global_model_is_fedavgs(tmp_path: Path) -> None:
    """APFL's w_i take plain SGD steps from w^t and are averaged by N_i (APFL paper Algorithm 1): with momentum 0
    its global model is FedAvg's, whatever the local models and α do."""
    apfl = _run(tmp_path / "a", ["algorithm=apfl", *TWO_CLASSES, "seed=0", "momentum=0"], rounds=3)
    fedavg = _run(tmp_path / "f", ["algorithm=fedavg", *TWO_CLASSES, "seed=0", "momentum=0"], rounds=3)
    for name, v in fedavg.alg.models.items():
        torch.testing.assert_close(apfl.alg.models[name], v, atol=1e-5, rtol=1e-4)


# -- pFedMe ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_pfedme_personal_models_beat_its_global_model_under_label_shift(tmp_path: Path, seed: int) -> None:
    """pFedMe paper §5: the personalised models θ_i = prox(w) fit each client's own distribution better than the
    global model w; with two classes per client by far. The paper's λ = 15, K = 5, personal step 0.1 and about its
    R = 20 local steps a round (4 epochs of about 6 batches here)."""
    run = _run(tmp_path, ["algorithm=pfedme", *TWO_CLASSES, f"seed={seed}", "local_epochs=4"], rounds=10)
    personal, global_ = _val_accuracy(run), _val_accuracy(run, run.alg.models)
    assert personal > global_ + 0.1, (personal, global_)


def test_pfedme_personal_model_solves_the_moreau_inner_problem(tmp_path: Path) -> None:
    """pFedMe paper eq. 3: θ̂_i(w) = argmin_θ f_i(θ) + (λ/2)‖θ − w‖². One local step on one full batch, many inner
    steps: the stored personal model is the minimiser, its gradient ∇f_i(θ) + λ(θ − w^0) near zero (next to
    ∇f_i(w^0))."""
    run = _run(tmp_path, ["algorithm=pfedme", *TWO_CLASSES, "seed=0", "model=logistic", "batch_size=1000",
                          "algorithm.inner_steps=300", "algorithm.personal_lr=0.02"], rounds=1)
    alg, lam = run.alg, run.alg.params.lam
    w0 = {n: v[0] for n, v in alg.ctx.fresh_models(1).items()}
    x, y = alg.ctx.fed.train.client(0)

    def gradient(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        leaves = {n: v.detach().clone().requires_grad_(True) for n, v in params.items()}
        loss = torch.nn.functional.cross_entropy(torch.func.functional_call(alg.ctx.module, leaves, (x,)), y)
        return dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())), strict=True))

    theta = {n: v[0] for n, v in alg.personal.items()}
    g_theta, g_w0 = gradient(theta), gradient(w0)
    residual = sum(float(((g_theta[n] + lam * (theta[n] - w0[n])) ** 2).sum()) for n in theta) ** 0.5
    scale = sum(float((g_w0[n] ** 2).sum()) for n in theta) ** 0.5
    assert residual < 1e-3 * scale, (residual, scale)
