"""``engine=unit-loop`` (training.looped): units one by one with dense convolutions. On the CPU it trains the models
of the vectorised path and of the sequential reference to float tolerance (momentum, weight decay, proximal term,
per-sample weights, uneven clients, kept momentum); the CUDA-graph bookkeeping (a captured step is not applied
twice) is checked with a stand-in graph; an accelerator picks it automatically for models with large activations
and the vectorised path for the small ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.engine.memory import footprint
from fedcluster.engine.params import get_params, stack
from fedcluster.engine.runner import Run
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training import looped
from fedcluster.engine.training.kernels import auto_path
from fedcluster.models import build_model
from tests.support.fake_device import FakeDevice

pytestmark = pytest.mark.device  # on a GPU machine these run on the GPU (tests/conftest.py)
SOLVER = Solver(lr=0.05, epochs=2, batch_size=8, momentum=0.9, weight_decay=1e-3, prox_mu=0.05)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _train(path: str, model: str = "light-cnn", momentum: str = "reset", rounds: int = 1, device: str = "cpu"
           ) -> tuple[dict, LocalTrainer]:
    gen = torch.Generator().manual_seed(0)
    sizes = np.array([11, 17, 3])
    x = torch.randn(int(sizes.sum()), 1, 8, 8, generator=gen).to(device)
    y = torch.randint(0, 4, (len(x),), generator=gen).to(device)
    torch.manual_seed(0)
    module = build_model(model, (1, 8, 8), 4)
    trainer = LocalTrainer(module, x, y, np.concatenate([[0], np.cumsum(sizes)]), "classification", seed=0, path=path,
                      client_momentum=momentum)
    models = stack([get_params(build_model(model, (1, 8, 8), 4)) for _ in range(2)])
    models = {k: v.to(device) for k, v in models.items()}
    clients = np.repeat(np.arange(len(sizes)), 2)
    weights = [np.random.default_rng(u).random(int(sizes[c])).astype(np.float32) for u, c in enumerate(clients)]
    out = {}
    for r in range(rounds):  # kept momentum carries over
        out = trainer.train(models, clients, SOLVER, round_=r, weights=weights,
                            init_index=np.tile([0, 1], len(sizes)))
    return out, trainer


@pytest.mark.parametrize("model", ["light-cnn", "mlp"])
def test_unit_loop_trains_the_models_of_the_vectorised_and_reference_paths(model: str) -> None:
    loop, _ = _train("unit-loop", model)
    for other in ("vectorized", "sequential"):
        ref, _ = _train(other, model)
        for k in loop:
            torch.testing.assert_close(loop[k], ref[k], rtol=1e-4, atol=1e-5)


def test_unit_loop_keeps_each_clients_momentum_like_the_vectorised_path() -> None:
    (loop, t1), (ref, t2) = (_train("unit-loop", momentum="keep", rounds=2),
                                    _train("vectorized", momentum="keep", rounds=2))
    for k in loop:
        torch.testing.assert_close(loop[k], ref[k], rtol=1e-4, atol=1e-5)
    a, b = t1.momentum_state()["0"], t2.momentum_state()["0"]
    for k in a["buffers"]:
        torch.testing.assert_close(a["buffers"][k], b["buffers"][k], rtol=1e-4, atol=1e-5)


def test_captured_steps_are_applied_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for CUDA graphs: capturing runs the step at hand, each replay runs one step."""
    replays = [0]

    class Graph:
        def __init__(self, fn) -> None:
            self.fn = fn

        def replay(self) -> None:
            replays[0] += 1
            self.fn()

    def capture(fn, lane):
        fn()
        return Graph(fn)

    monkeypatch.setattr(looped, "_capture", capture)
    real = looped.train_looped
    monkeypatch.setattr(looped, "train_looped", lambda *a, **kw: real(*a, **{**kw, "graphs": True}))
    graphed, _ = _train("unit-loop")
    monkeypatch.setattr(looped, "train_looped", real)
    eager, _ = _train("unit-loop")
    assert replays[0] > 0
    for k in graphed:
        torch.testing.assert_close(graphed[k], eager[k], rtol=1e-6, atol=1e-7)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs and streams need a GPU")
def test_on_a_gpu_graphed_units_train_the_models_of_the_vectorised_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # cuDNN convolutions default to TF32 (10-bit mantissa) and the two paths pick different algorithms: compare
    # them in full float32, where only the summation order differs
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    loop, _ = _train("unit-loop", device="cuda")
    ref, _ = _train("vectorized", device="cuda")
    for k in loop:
        torch.testing.assert_close(loop[k], ref[k], rtol=1e-3, atol=1e-4)


def test_an_accelerator_picks_the_unit_loop_for_large_models_only() -> None:
    picks = {}
    for name, shape in (("resnet18", (3, 32, 32)), ("mobilenet-v2", (3, 32, 32)), ("cnn", (1, 28, 28)),
                        ("light-cnn", (1, 28, 28)), ("mlp", (1, 28, 28))):
        fp = footprint(build_model(name, shape, 10), shape)
        picks[name] = auto_path(name, "cuda", "fp32", activation_bytes=fp.activations)
    assert picks == {"resnet18": "unit-loop", "mobilenet-v2": "unit-loop", "cnn": "vectorized",
                     "light-cnn": "vectorized", "mlp": "vectorized"}
    assert auto_path("resnet18", "cpu") == "vectorized"  # the CPU keeps its paths


def test_a_run_on_an_accelerator_picks_it_and_keeps_its_tensors_on_the_device(
        tmp_path: Path, strict_device: FakeDevice, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(looped, "LOOP_ACTIVATIONS", 0)  # the digits' MLP counts as large here
    cfg, typed = resolve(load_raw(None, ["algorithm=ifca", "model.hidden=[16]", "num_clients=4", "rounds=2",
                                         "progress=false", f"out={tmp_path / 'r'}"]))
    run = Run(cfg, typed, fed=build_federation(cfg, typed["scenario"]))
    assert run.ctx.trainer.path == "unit-loop"
    run.execute()
    assert not strict_device.problems, "\n".join(sorted(set(strict_device.problems)))
