"""Device handling: keys and errors, the trainer on another device, bf16, memory-budgeted chunks, and every
algorithm keeping its tensors where the run put them (checked on the CPU with a simulated device; on a GPU
for real when one is present)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.engine.algorithm import Context
from fedcluster.engine.device import check_engine, resolve_device
from fedcluster.engine.memory import MAX_UNITS, budget_bytes, chunk_units, footprint
from fedcluster.engine.params import get_params, stack
from fedcluster.engine.runner import Run, evaluate
from fedcluster.engine.sampling import participation_stream
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.kernels import auto_path
from fedcluster.engine.transfer import state_to_device
from fedcluster.errors import ConfigError
from fedcluster.models import build_model
from tests.conformance.methods import own_keys
from tests.support.fake_device import FakeDevice

pytestmark = pytest.mark.device  # on a GPU machine these run on the GPU (tests/conftest.py)
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
RUN_DEVICE = torch.device("cpu")  # the run's device
FAST = ["num_clients=8", "rounds=2", "progress=false", "threads=1"]
REGRESSION = ["scenario=mixed-regression", "dataset=mixed-regression", "model=linear-nobias"]
# the code paths default settings leave out: shared bodies, variants, splits, merges, removals, FedMD's Phase 2
VARIANTS = {
    "fedrc split cnn": ["algorithm=fedrc", "algorithm.split=true", "model=light-cnn"],
    "fedrc adam trhc": ["algorithm=fedrc", "algorithm.adam=true", "algorithm.hard=train"],
    "fedrc tehc ft": ["algorithm=fedrc", "algorithm.hard=test", "algorithm.ft=true"],
    "fedem joint sample": ["algorithm=fedem", "algorithm.formulation=joint", "algorithm.weights_scope=sample",
                           "algorithm.mu_tilde=0.4"],
    "fedsoft split": ["algorithm=fedsoft", "algorithm.split=true"],
    "ifca gradient": ["algorithm=ifca", "algorithm.variant=gradient"],
    "cfl splits": ["algorithm=cfl", "algorithm.warmup=0", "algorithm.tol1=1e9", "algorithm.tol2=0",
                   "algorithm.min_size=2"],
    "icfl splits": ["algorithm=icfl", "algorithm.alpha0=0.01"],
    "stocfl merges": ["algorithm=stocfl", "algorithm.tau=-1"],
    "cflgp model random": ["algorithm=cflgp", "algorithm.period=1", "algorithm.variant=model",
                           "algorithm.compression=random", "algorithm.compression_ratio=2"],
    "hcfl splits": ["algorithm=hcfl", "algorithm.rho=0", "algorithm.split=false", "algorithm.distance=update-cosine"],
    "hcfl cfl rule": ["algorithm=hcfl", "algorithm.adaptive=cfl", "algorithm.tol1=1e9", "algorithm.tol2=0",
                      "algorithm.min_size=2", "algorithm.weights=hard-loss"],
    "fedmd phase 2": ["algorithm=fedmd", *REGRESSION, "algorithm.num_clusters=3", "algorithm.phase1_rounds=1"],
    "fedmd oneshot": ["algorithm=fedmd", *REGRESSION, "algorithm.num_clusters=3", "algorithm.init=oneshot"],
    "flhc clusters": ["algorithm=flhc", "algorithm.cluster_round=1", "algorithm.num_clusters=2"],
    "fedgroup inter-group": ["algorithm=fedgroup", "algorithm.inter_lr=0.5", "algorithm.pretrain_scale=1"],
    "fedgwc splits": ["algorithm=fedgwc", "algorithm.eps=1", "algorithm.patience=1", "algorithm.min_cluster_size=3",
                      "clients_per_round=0.5"],
}


def _cfg(tmp_path: Path, *items: str):
    return resolve(load_raw(None, [*FAST, f"out={tmp_path / 'run'}", *items]))


def _rows(path: Path) -> list[dict[str, str]]:
    with (path / "rounds.csv").open() as f:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]


# -- the simulated device -----------------------------------------------------------------------------
def test_fake_device_flags_what_would_fail_on_a_gpu() -> None:
    with FakeDevice() as fake:
        device = torch.ones(3)
        device.cpu().numpy()  # fine: copied to the host first
        torch.from_numpy(np.ones(3)).numpy()  # fine: a host tensor
        device[torch.from_numpy(np.array([0, 1]))]  # fine: CUDA takes CPU indices
        host = torch.from_numpy(np.ones(3, dtype=np.float32))
        _ = torch.zeros(3, device=host.device) + host  # fine: a host tensor's device is the host
        _ = torch.nn.Linear(3, 1).to(host.device)(host)  # a module moved there too
        device.copy_(host)  # fine: a copy between host and device
        assert not fake.problems
        device.numpy()
        _ = torch.from_numpy(np.ones(3, dtype=np.float32)) + device
        np.asarray(device)
    assert len(fake.problems) == 3


# every registered method through the runner on the simulated device: tests/conformance/test_every_method.py


def _direct_cases() -> list:
    cases = [pytest.param(n, [f"algorithm={n}", *own_keys(n)], id=n) for n in ALGORITHMS.names()]
    return cases + [pytest.param(name, items, id=name) for name, items in VARIANTS.items()]


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models: one intra-op thread is fastest, and on a busy 2-core machine several threads stall."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("name,items", _direct_cases())
def test_every_algorithm_called_directly_keeps_its_tensors_on_the_device(tmp_path: Path, strict_device: FakeDevice,
                                                                          name: str, items: list[str]) -> None:
    """What a benchmark or a library user does: build the context by hand and call the method, with no runner
    and no default device. The federation and the models are on the (simulated) device; a tensor the method
    makes on the host and combines with them, or a device tensor read as NumPy, fails (tests/support/fake_device.py,
    strict). Three rounds with evaluation, then a checkpoint round trip through the CPU and one more round."""
    cfg, typed = _cfg(tmp_path, *items, "rounds=4")
    fed = build_federation(cfg, typed["scenario"]).to("cpu")  # strict_device: 'moved to the device'
    device = fed.train.x.device
    torch.manual_seed(cfg.seed)
    module = build_model(cfg.model, fed.input_shape, fed.output_dim, typed["model"]).to(device)
    trainer = LocalTrainer(module, fed.train.x, fed.train.y, fed.train.ptr, fed.task, seed=cfg.seed, path="vectorized")
    solver = Solver(lr=cfg.lr, epochs=cfg.local_epochs, batch_size=cfg.batch_size, momentum=cfg.momentum)
    alg = ALGORITHMS.get(cfg.algorithm).obj(Context(cfg, fed, module, trainer, solver), typed["algorithm"])
    stream = participation_stream(fed.num_clients, cfg.cohort_size(), cfg.rounds, cfg.seed)
    counts = []
    for t in range(3):
        alg.run_round(t, stream[t])
        evaluate(alg, fed)
        counts.append(alg.num_clusters)
    alg.load_state_dict(state_to_device(state_to_device(alg.state_dict(), torch.device("cpu")), device))
    alg.run_round(3, stream[3])
    evaluate(alg, fed)
    assert not strict_device.problems, "\n".join(sorted(set(strict_device.problems)))
    if name.endswith("splits") or name == "hcfl cfl rule":
        assert max(counts) > counts[0], counts  # the split path really ran
    if name == "stocfl merges":
        assert alg.num_clusters < fed.num_clients  # the merge path really ran


def test_split_body_and_cnn_keep_their_tensors_on_the_runs_device(tmp_path: Path, strict_device: FakeDevice) -> None:
    cfg, typed = _cfg(tmp_path, "algorithm=fedrc", "algorithm.split=true", "model=light-cnn", "engine=vectorized")
    Run(cfg, typed, fed=build_federation(cfg, typed["scenario"])).execute()
    assert not strict_device.problems, "\n".join(sorted(set(strict_device.problems)))


# -- keys and errors ----------------------------------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without a GPU")
@pytest.mark.host_only(reason="about a machine without a GPU, which the simulated accelerator would stand in for")
def test_cuda_without_a_gpu_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["run", *FAST, "device=cuda", f"out={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "device=cuda" in err and "device=cpu" in err
    assert resolve_device("auto") == torch.device("cpu")


def test_bad_keys_are_one_line_errors(tmp_path: Path, capsys) -> None:
    for bad, word in (("device=tpu", "device"), ("precision=fp16", "precision"), ("chunk_mb=0", "chunk_mb"),
                      ("chunk_mb=.nan", "chunk_mb")):
        assert main(["run", *FAST, bad, f"out={tmp_path / 'r'}"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and word in err, err


def test_cpu_only_engines_are_refused_on_an_accelerator() -> None:
    cuda = torch.device("cuda")
    for engine in ("pool", "pool-vectorized", "dense"):
        with pytest.raises(ConfigError, match=f"engine={engine} runs on the CPU only"):
            check_engine(engine, cuda, "fp32")
    with pytest.raises(ConfigError, match="engine=dense computes in fp32"):
        check_engine("dense", torch.device("cpu"), "bf16")
    check_engine("vectorized", cuda, "bf16")


def test_auto_engine_per_device() -> None:
    assert [auto_path(m) for m in ("mlp", "light-cnn", "cnn", "resnet18")] == ["dense", "pool", "pool", "vectorized"]
    assert {auto_path(m, "cuda", p) for m in ("mlp", "cnn", "resnet18") for p in ("fp32", "bf16")} == {"vectorized"}
    assert auto_path("mlp", "cpu", "bf16") == "vectorized"  # the dense path is fp32-only


# -- the trainer on another device ------------------------------------------------------------------------
def _setup(sizes=(37, 64, 5, 90), shape=(1, 8, 8), model="light-cnn"):
    g = torch.Generator().manual_seed(0)
    n = sum(sizes)
    x, y = torch.rand(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)
    x, y = x.to(RUN_DEVICE), y.to(RUN_DEVICE)  # named, so that the simulated accelerator counts them its own
    torch.manual_seed(1)
    module = build_model(model, shape, 10)
    init = stack([get_params(module) for _ in sizes])
    return module, x, y, np.concatenate([[0], np.cumsum(sizes)]), init


def test_trainer_computes_on_its_datas_device() -> None:
    """Data and models on 'meta' (shapes only): any tensor the vectorised path made on the CPU would fail to
    mix. (The sequential reference reads batch sizes with .item(), which meta tensors cannot answer.)"""
    path = "vectorized"
    module, x, y, ptr, init = _setup(model="mlp")
    meta = {k: v.to("meta") for k, v in init.items()}
    tr = LocalTrainer(module, x.to("meta"), y.to("meta"), ptr, "classification", seed=0, path=path)
    out = tr.train(meta, np.arange(4), Solver(lr=0.1, batch_size=16, momentum=0.9, prox_mu=0.1), 0,
                   weights=[np.ones(n, dtype=np.float32) for n in np.diff(ptr)])
    assert {v.device.type for v in out.values()} == {"meta"}
    assert {p.device.type for p in tr.module.parameters()} == {"meta"}
    with pytest.raises(ValueError, match="runs on the CPU only"):
        LocalTrainer(module, x.to("meta"), y.to("meta"), ptr, "classification", seed=0, path="pool")


def test_bf16_autocast_trains_close_to_fp32_but_not_equal() -> None:
    module, x, y, ptr, init = _setup()
    solver = Solver(lr=0.05, batch_size=16)
    out = {}
    for path, prec in (("vectorized", "fp32"), ("vectorized", "bf16"), ("sequential", "bf16")):
        tr = LocalTrainer(module, x, y, ptr, "classification", seed=0, path=path, precision=prec)
        out[path, prec] = tr.train(init, np.arange(4), solver, 0)
    fp32, bf16 = out["vectorized", "fp32"], out["vectorized", "bf16"]
    assert all(v.dtype == torch.float32 for v in bf16.values())  # fp32 master weights
    assert any(not torch.equal(bf16[k], fp32[k]) for k in fp32)  # autocast really ran
    for k in fp32:
        torch.testing.assert_close(bf16[k], fp32[k], rtol=0.05, atol=0.02)
        torch.testing.assert_close(out["sequential", "bf16"][k], bf16[k], rtol=0.05, atol=0.02)
    with pytest.raises(ValueError, match="precision"):
        LocalTrainer(module, x, y, ptr, "classification", seed=0, precision="fp16")


# Units per chunk at benchmarks/speed/engine_speed.py's setting (1×28×28 inputs, 10 classes, batch 32) as measured
# before the memory estimators were merged: the CPU speed table depends on them. Dense path: cache-sized
# (6 MiB of weights, a multiple of the threads) per thread count; vectorised path: 256 without chunk_mb,
# else chunk_mb over the per-unit estimate.
CPU_CHUNKS = {
    "logistic": ({1: 200, 2: 200, 3: 198, 4: 200, 8: 200}, {1: 2, 6: 13, 64: 145, 1024: 2324}),
    "mlp": ({1: 9, 2: 8, 3: 9, 4: 8, 8: 8}, {1: 1, 6: 1, 64: 18, 1024: 295}),
    "light-cnn": ({1: 7, 2: 6, 3: 6, 4: 4, 8: 8}, {1: 1, 6: 1, 64: 3, 1024: 50}),
}


@pytest.mark.parametrize("model", list(CPU_CHUNKS))
def test_cpu_chunk_sizes_at_the_benchmark_setting_are_pinned(model: str) -> None:
    from fedcluster.engine.params import repeat
    from fedcluster.engine.training.dense import chunk_units

    dense, budgeted = CPU_CHUNKS[model]
    torch.manual_seed(0)
    module = build_model(model, (1, 28, 28), 10)
    x, y, ptr = torch.rand(4, 1, 28, 28), torch.randint(0, 10, (4,)), np.array([0, 2, 4])
    threads = torch.get_num_threads()
    try:
        for t, units in dense.items():
            torch.set_num_threads(t)
            assert chunk_units(repeat(get_params(module), 2)) == units, (t, units)
    finally:
        torch.set_num_threads(threads)
    tr = LocalTrainer(module, x, y, ptr, "classification", seed=0)
    assert tr.chunk_size(32) == 256 and tr.max_units == 256  # no budget on the CPU (pool-vectorized: max_units)
    for mb, units in budgeted.items():
        assert LocalTrainer(module, x, y, ptr, "classification", seed=0, chunk_mb=mb).chunk_size(32) == units, mb


def test_memory_budget_chunks_give_the_same_models() -> None:
    module, x, y, ptr, init = _setup()
    fp = footprint(module, tuple(x.shape[1:]))
    assert fp is not None
    per_unit = fp.step_bytes(16)
    params = sum(p.numel() * 4 for p in module.parameters())
    assert fp.params == params and per_unit > 5 * params  # a batch's activations on top of the parameter copies
    assert chunk_units(3 * per_unit, per_unit) == 3 and chunk_units(1, per_unit) == 1
    assert budget_bytes(torch.device("cpu"), None) is None  # no budget on the CPU: the trainer keeps max_units
    assert budget_bytes(torch.device("cpu"), 1.5) == int(1.5 * 2**20)
    assert LocalTrainer(module, x, y, ptr, "classification", seed=0).chunk_size(16) == MAX_UNITS
    solver = Solver(lr=0.05, batch_size=16, momentum=0.9)
    whole = LocalTrainer(module, x, y, ptr, "classification", seed=0).train(init, np.arange(4), solver, 0)
    tr = LocalTrainer(module, x, y, ptr, "classification", seed=0, chunk_mb=1.5 * per_unit / 2**20)
    assert tr.chunk_size(16) == 1
    chunked = tr.train(init, np.arange(4), solver, 0)
    for k in whole:
        torch.testing.assert_close(chunked[k], whole[k], rtol=1e-5, atol=1e-6)


@pytest.mark.host_only(reason="checks Federation.to itself, which the simulated accelerator replaces")
def test_federation_moves_once_and_whole(tmp_path: Path) -> None:
    cfg, typed = _cfg(tmp_path)
    fed = build_federation(cfg, typed["scenario"])
    assert fed.to("cpu") is fed
    meta = fed.to("meta")
    assert {s.x.device.type for s in (meta.train, meta.val, meta.test)} == {"meta"}
    assert {s.y.device.type for s in (meta.train, meta.val, meta.test)} == {"meta"}
    assert np.array_equal(meta.train.ptr, fed.train.ptr) and meta.true_cluster is fed.true_cluster


def test_cpu_runs_are_deterministic(tmp_path: Path) -> None:
    for d in ("a", "b"):
        assert main(["run", *FAST, "algorithm=fedrc", "engine=vectorized", f"out={tmp_path / d}"]) == 0
    assert _rows(tmp_path / "a") == _rows(tmp_path / "b")


# -- on a GPU (skipped without one) --------------------------------------------------------------------------
@CUDA
@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_every_algorithm_runs_on_cuda(tmp_path: Path, name: str) -> None:
    cfg, typed = _cfg(tmp_path, f"algorithm={name}", "device=cuda", *own_keys(name))
    run = Run(cfg, typed)
    run.execute()
    assert {v.device.type for v in run.alg.models.values()} == {"cuda"}
    assert run.fed.train.x.device.type == "cuda" and run.ctx.trainer.path == "vectorized"


@CUDA
@pytest.mark.parametrize("extra", [[], ["model=light-cnn", "algorithm=fedrc", "algorithm.split=true"],
                                   ["precision=bf16", "model=light-cnn"]])
def test_cuda_same_seed_same_rounds(tmp_path: Path, extra: list[str]) -> None:
    for d in ("a", "b"):
        assert main(["run", *FAST, "device=cuda", "deterministic=true", *extra, f"out={tmp_path / d}"]) == 0
    assert _rows(tmp_path / "a") == _rows(tmp_path / "b")


@CUDA
@pytest.mark.parametrize("model", ["mlp", "light-cnn"])
def test_cpu_and_cuda_agree(tmp_path: Path, model: str) -> None:
    for dev in ("cpu", "cuda"):
        assert main(["run", *FAST, "algorithm=fedrc", f"model={model}", "engine=vectorized", f"device={dev}",
                     "deterministic=true", f"out={tmp_path / dev}"]) == 0  # no TF32: float tolerance
    for a, b in zip(_rows(tmp_path / "cpu"), _rows(tmp_path / "cuda"), strict=True):
        for k in ("val_acc", "test_acc", "val_loss", "test_loss"):
            assert float(a[k]) == pytest.approx(float(b[k]), abs=2e-3)
