"""The three training paths give the same models; the batch schedule and aggregation are right."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.engine.params import get_params, repeat, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.batches import make_schedule
from fedcluster.engine.training.dense import dense_layers
from fedcluster.engine.training.multihead import MultiHead
from fedcluster.models import build_model

DEVICE = torch.device("cpu")  # the run's device (named, so that the simulated accelerator counts these tensors its own)
# --strict-device: the dense and pool paths exist only on the CPU (engine=dense/pool is refused on an accelerator)
CPU_ONLY = pytest.mark.host_only(reason="engine=dense and pool run on the CPU only")


def _data(sizes: list[int], shape: tuple[int, ...], seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n = sum(sizes)
    x = torch.rand(n, *shape, generator=g).to(DEVICE)
    y = torch.randint(0, 10, (n,), generator=g).to(DEVICE)
    return x, y, np.concatenate([[0], np.cumsum(sizes)])


def _train(path: str, model_name: str, shape, solver: Solver, units_per_client: int = 1, weighted: bool = False,
           task: str = "classification"):
    sizes = [37, 64, 5, 90]
    x, y, ptr = _data(sizes, shape)
    if task == "regression":
        y = y.float() / 10
    torch.manual_seed(1)
    out = 10 if task == "classification" else 1
    module = build_model(model_name, shape, out)
    models = [get_params(module)] + [get_params(build_model(model_name, shape, out))
                                    for _ in range(units_per_client - 1)]
    clients = np.repeat(np.arange(len(sizes)), units_per_client)
    init = stack([models[u % units_per_client] for u in range(len(clients))])
    weights = None
    if weighted:
        rng = np.random.default_rng(0)
        weights = [rng.random(sizes[c]).astype(np.float32) for c in clients]
    tr = LocalTrainer(module, x, y, ptr, task, seed=3, path=path, workers=2)
    assert (tr.dense is not None) == (path == "dense")  # the dense path really runs (no silent fallback)
    try:
        return tr.train(init, clients, solver, round_=2, weights=weights)
    finally:
        tr.close()


SOLVERS = [
    Solver(lr=0.1, epochs=1, batch_size=16),
    Solver(lr=0.05, epochs=2, batch_size=8, momentum=0.9, weight_decay=1e-3, prox_mu=0.1),
]


@pytest.mark.parametrize("model_name,shape", [("logistic", (1, 8, 8)), ("mlp", (1, 8, 8)), ("light-cnn", (1, 8, 8))])
@pytest.mark.parametrize("solver", SOLVERS)
def test_vectorized_equals_sequential(model_name: str, shape, solver: Solver) -> None:
    ref = _train("sequential", model_name, shape, solver, units_per_client=2, weighted=True)
    fast = _train("vectorized", model_name, shape, solver, units_per_client=2, weighted=True)
    for k in ref:
        torch.testing.assert_close(fast[k], ref[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model_name,task", [("logistic", "classification"), ("mlp", "classification"),
                                             ("linear", "regression"), ("linear-nobias", "regression")])
@pytest.mark.parametrize("solver", SOLVERS)
@CPU_ONLY
def test_dense_path_equals_sequential(model_name: str, task: str, solver: Solver) -> None:
    ref = _train("sequential", model_name, (1, 8, 8), solver, units_per_client=2, weighted=True, task=task)
    fast = _train("dense", model_name, (1, 8, 8), solver, units_per_client=2, weighted=True, task=task)
    for k in ref:
        torch.testing.assert_close(fast[k], ref[k], rtol=1e-4, atol=1e-5)


def test_dense_layers_detection() -> None:
    mlp = build_model("mlp", (1, 8, 8), 10, {"hidden": [16, 8]})
    assert dense_layers(mlp) == [["body.1"], ["body.3"], ["head"]]
    assert dense_layers(build_model("logistic", (1, 8, 8), 10)) == [["head"]]
    assert dense_layers(build_model("light-cnn", (1, 8, 8), 10)) is None
    assert dense_layers(MultiHead(mlp, 3)) == [["body.1"], ["body.3"], ["heads.0", "heads.1", "heads.2"]]
    assert dense_layers(MultiHead(build_model("logistic", (1, 8, 8), 10), 2)) == [["heads.0", "heads.1"]]
    assert dense_layers(MultiHead(build_model("light-cnn", (1, 8, 8), 10), 2)) is None
    # stacks the hand-written pass would get wrong are refused
    assert dense_layers(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 2))) is None
    assert dense_layers(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))) is None
    assert dense_layers(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())) is None


@pytest.mark.parametrize("path", ["pool", "pool-vectorized"])
@CPU_ONLY
def test_pool_paths_equal_sequential(path: str) -> None:
    solver = SOLVERS[1]
    ref = _train("sequential", "mlp", (1, 8, 8), solver)
    fast = _train(path, "mlp", (1, 8, 8), solver)
    for k in ref:
        torch.testing.assert_close(fast[k], ref[k], rtol=1e-4, atol=1e-5)


def test_training_changes_models_and_zero_weights_freeze_them() -> None:
    solver = Solver(lr=0.1, epochs=1, batch_size=16)
    sizes = [20, 30]
    x, y, ptr = _data(sizes, (1, 8, 8))
    module = build_model("logistic", (1, 8, 8), 10)
    init = repeat(get_params(module), 2)
    tr = LocalTrainer(module, x, y, ptr, "classification", seed=0)
    out = tr.train(init, np.array([0, 1]), solver, 0, weights=[np.zeros(20), np.ones(30)])
    for k in init:
        torch.testing.assert_close(out[k][0], init[k][0])  # γ = 0: the unit sees no data
        assert not torch.allclose(out[k][1], init[k][1])


def test_schedule_covers_each_sample_once_per_epoch() -> None:
    sizes = np.array([10, 33, 7])
    sched = make_schedule(sizes, np.array([0, 1, 2, 1]), seed=0, round_=0, epochs=2, batch_size=8)
    assert sched.steps.tolist() == [4, 10, 2, 10]
    for u, c in enumerate([0, 1, 2, 1]):
        seen = sched.local[u][sched.mask[u] > 0].numpy()
        assert np.array_equal(np.sort(seen), np.sort(np.tile(np.arange(sizes[c]), 2)))
    # units of the same client share the order; another round reshuffles
    assert torch.equal(sched.local[1], sched.local[3])
    other = make_schedule(sizes, np.array([1]), seed=0, round_=1, epochs=2, batch_size=8)
    assert not torch.equal(other.local[0], sched.local[1])


def test_schedule_drop_last_gives_full_batches_only() -> None:
    """drop_last (S4's code: one step of exactly 128 per round at 160 samples): full batches, a small client none."""
    sizes = np.array([160, 100, 300])
    sched = make_schedule(sizes, np.array([0, 1, 2]), seed=0, round_=0, epochs=1, batch_size=128, drop_last=True)
    assert sched.steps.tolist() == [1, 0, 2]
    assert sched.mask[0, 0].sum() == 128 and sched.mask[1].sum() == 0 and sched.mask[2].sum() == 256
    seen = sched.local[2][sched.mask[2] > 0].numpy()
    assert len(set(seen.tolist())) == 256  # distinct samples of one shuffled pass
    keep = make_schedule(sizes, np.array([0, 1, 2]), seed=0, round_=0, epochs=1, batch_size=128)
    assert keep.steps.tolist() == [2, 1, 3]  # default: the short last batch is a step


def test_drop_last_reaches_training_through_the_run_config(tmp_path: Path) -> None:
    """drop_last=true reaches the solver; with a batch larger than every client it would train nothing, so it is
    refused in one line; without it the batch is capped to the largest client and trains."""
    from fedcluster.config.run_config import load_raw, resolve
    from fedcluster.engine.runner import Run
    from fedcluster.errors import ConfigError

    def build(*extra: str) -> Run:
        cfg, typed = resolve(load_raw(None, ["algorithm=fedavg", "rounds=1", "progress=false",
                                             f"out={tmp_path / str(len(list(tmp_path.iterdir())))}", *extra]))
        return Run(cfg, typed)

    with pytest.raises(ConfigError, match="drop_last=true with batch_size=1000"):
        build("drop_last=true", "batch_size=1000")
    run = build("drop_last=true", "batch_size=8")
    assert run.ctx.solver.drop_last
    run.ctx.trainer.close()
    run = build("batch_size=1000")
    before = {n: v.clone() for n, v in run.alg.models.items()}
    run.alg.run_round(0, run.stream[0])
    assert max(float((run.alg.models[n] - v).abs().max()) for n, v in before.items()) > 1e-5
    run.ctx.trainer.close()


def test_schedule_max_steps() -> None:
    sched = make_schedule(np.array([100]), np.array([0]), seed=0, round_=0, epochs=1, batch_size=10, max_steps=3)
    assert sched.steps.tolist() == [3]


def test_nonfinite_units_are_found_and_an_overflowing_sum_is_no_false_alarm() -> None:
    x, y, ptr = _data([3, 3], (1, 8, 8))
    tr = LocalTrainer(build_model("logistic", (1, 8, 8), 10), x, y, ptr, "classification", seed=0)
    out = {"w": torch.ones(5, 3, 2), "b": torch.ones(5, 2)}
    out["w"][1, 0, 1] = float("nan")
    out["b"][2, 1] = float("-inf")
    out["w"][3] = 3e38  # finite entries whose sum overflows
    out["w"][4, 2, 0], out["w"][4, 2, 1] = float("inf"), float("-inf")  # a sum of NaN
    tr._watch(out, np.array([10, 11, 12, 13, 14]))
    assert tr.take_nonfinite() == [11, 12, 14] and tr.take_nonfinite() == []
    tr._watch({"w": torch.ones(2, 3)}, np.array([0, 1]))
    assert tr.take_nonfinite() == []


@pytest.mark.parametrize("path", ["sequential", "vectorized", *(pytest.param(p, marks=CPU_ONLY)
                                                                for p in ("dense", "pool", "pool-vectorized"))])
@pytest.mark.parametrize("solver", SOLVERS)
def test_shared_starting_points_train_exactly_like_copies(path: str, solver: Solver) -> None:
    """K models shared by many units through ``init_index`` give the very models that K·m copies give (the
    proximal centre defaults to each unit's start); the vectorised path is also cut into chunks of 3 units."""
    sizes = [37, 64, 5, 90]
    x, y, ptr = _data(sizes, (1, 8, 8))
    torch.manual_seed(1)
    module = build_model("mlp", (1, 8, 8), 10)
    models = stack([get_params(build_model("mlp", (1, 8, 8), 10)) for _ in range(3)])
    clients = np.repeat(np.arange(len(sizes)), 3)
    index = np.tile(np.arange(3), len(sizes))[::-1].copy()  # not in unit order
    copies = {n: v[torch.as_tensor(index)] for n, v in models.items()}
    rng = np.random.default_rng(0)
    weights = [rng.random(sizes[c]).astype(np.float32) for c in clients]
    tr = LocalTrainer(module, x, y, ptr, "classification", seed=3, path=path, workers=2, max_units=3)
    try:
        ref = tr.train(copies, clients, solver, 2, weights=weights)
        shared = tr.train(models, clients, solver, 2, weights=weights, init_index=index)
    finally:
        tr.close()
    for k in ref:
        assert torch.equal(shared[k], ref[k]), k
