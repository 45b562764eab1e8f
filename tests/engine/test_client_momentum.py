"""client_momentum=keep: each client's SGD momentum buffer carried across rounds (engine.training.momentum)."""

from __future__ import annotations

import copy
import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.app.cli import main
from fedcluster.engine.params import Params, get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.batches import make_schedule
from fedcluster.engine.training.kernels import per_sample_loss
from fedcluster.engine.training.multihead import MultiHead, MultiHeadLoss
from fedcluster.models.base import build_model

SOLVER = Solver(lr=0.1, momentum=0.9, weight_decay=5e-4, batch_size=16)
PTR = np.array([0, 50, 120, 200, 300])

# --strict-device: these build their models and inputs themselves and call them directly (no run moves them)
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


def _data() -> tuple[torch.Tensor, torch.Tensor, torch.nn.Module, Params]:
    torch.manual_seed(0)
    x, y = torch.randn(300, 1, 8, 8), torch.randint(0, 4, (300,))
    models = [build_model("mlp", (1, 8, 8), 4, {"hidden": [16]}) for _ in range(2)]
    return x, y, models[0], stack([get_params(m) for m in models])


def _three_rounds(path: str, mode: str, max_units: int = 64) -> tuple[Params, Params]:
    """Round 0 and round 2 of the same start (two cluster models, client 1 trains both), round 1 in between."""
    x, y, module, init = _data()
    t = LocalTrainer(module, x, y, PTR, "classification", seed=0, path=path, client_momentum=mode, max_units=max_units)
    clients, models = np.array([0, 1, 2, 3, 1]), np.array([0, 1, 0, 1, 0])
    first = t.train(init, clients, SOLVER, 0, init_index=models)
    t.train(first, clients, SOLVER, 1)  # units without init_index: per-client starting points
    return first, t.train(init, clients, SOLVER, 2, init_index=models)


def _gap(a: Params, b: Params) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@HOST_ONLY
def test_kept_momentum_changes_later_rounds_only() -> None:
    """The first round has no buffer to continue (keep == reset); a later round continues round 0/1's buffers."""
    keep0, keep2 = _three_rounds("sequential", "keep")
    reset0, reset2 = _three_rounds("sequential", "reset")
    assert _gap(keep0, reset0) == 0.0
    assert _gap(keep2, reset2) > 1e-3


def test_reset_carries_nothing_between_rounds() -> None:
    """client_momentum=reset (the default): a round's training does not depend on the rounds before it."""
    x, y, module, init = _data()
    clients, models = np.array([0, 1, 2, 3, 1]), np.array([0, 1, 0, 1, 0])
    t = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="dense")
    assert t.momentum is None
    t.train(init, clients, SOLVER, 0, init_index=models)
    after = t.train(init, clients, SOLVER, 2, init_index=models)
    fresh = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="dense").train(init, clients, SOLVER, 2,
                                                                                     init_index=models)
    assert _gap(after, fresh) == 0.0


@HOST_ONLY
@pytest.mark.parametrize("path,max_units", [("vectorized", 64), ("vectorized", 2), ("dense", 64)])
def test_paths_keep_the_same_buffers_as_the_reference(path: str, max_units: int) -> None:
    _, ref = _three_rounds("sequential", "keep")
    _, got = _three_rounds(path, "keep", max_units)
    assert _gap(got, ref) < 1e-5


@HOST_ONLY
def test_sequential_keep_equals_one_persistent_torch_optimizer() -> None:
    """A client's unit over two rounds == one nn.Module with one torch.optim.SGD that is never re-created (the
    FedRC paper's code: one optimizer per client and model), each round restarting from the server's model."""
    x, y, module, init = _data()
    one = {k: v[:1] for k, v in init.items()}
    t = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="sequential", client_momentum="keep")
    clients = np.array([2])
    t.train(one, clients, SOLVER, 0)
    got = t.train(one, clients, SOLVER, 1)

    model = copy.deepcopy(module)
    opt = torch.optim.SGD(model.parameters(), lr=SOLVER.lr, momentum=SOLVER.momentum,
                          weight_decay=SOLVER.weight_decay)
    loss_fn = per_sample_loss("classification")
    for round_ in (0, 1):
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(one[n][0])
        sched = make_schedule(np.diff(PTR), clients, 0, round_, 1, SOLVER.batch_size)
        for s in range(int(sched.steps[0])):
            idx = sched.local[0, s, : int(sched.mask[0, s].sum())] + int(PTR[2])
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).mean().backward()
            opt.step()
    want = {n: p.detach() for n, p in model.named_parameters()}
    assert max(float((got[k][0] - want[k]).abs().max()) for k in got) < 1e-6


@HOST_ONLY
def test_dense_keeps_joined_head_buffers_like_the_reference() -> None:
    """A shared body with K heads (engine.training.multihead) on the dense path: the K heads' buffers are split back."""
    x, y, module, init = _data()
    heads = MultiHead(module, 2)
    packed = {k: v[:1] for k, v in get_params_stack(heads).items()}
    out = {}
    for path in ("sequential", "dense"):
        t = LocalTrainer(module, x, y, PTR, "classification", seed=0, path=path, client_momentum="keep")
        s = t.sibling(heads, MultiHeadLoss("classification"))
        clients = np.array([0, 1, 2])
        w = [np.ones((int(n), 2), dtype=np.float32) for n in np.diff(PTR)[clients]]
        s.train(packed, clients, SOLVER, 0, weights=w, init_index=np.zeros(3, dtype=np.int64))
        out[path] = s.train(packed, clients, SOLVER, 1, weights=w, init_index=np.zeros(3, dtype=np.int64))
    assert _gap(out["dense"], out["sequential"]) < 1e-5


def get_params_stack(module: torch.nn.Module) -> Params:
    return stack([get_params(module)])


def _rows(run: Path) -> list[dict[str, str]]:
    with open(run / "rounds.csv") as f:
        return list(csv.DictReader(f))


def test_resume_with_kept_momentum_equals_a_straight_run(tmp_path: Path) -> None:
    """The buffers are checkpointed: 3 rounds in one go == 2 rounds, then ``fedcluster resume`` for the 3rd."""
    common = ["algorithm=fedrc", "progress=false", "checkpoint_every=1", "momentum=0.9", "client_momentum=keep",
              "lr=0.05"]
    assert main(["run", *common, "rounds=3", f"out={tmp_path / 'straight'}"]) == 0
    assert main(["run", *common, "rounds=2", f"out={tmp_path / 'resumed'}"]) == 0
    assert main(["resume", str(tmp_path / "resumed"), "rounds=3"]) == 0
    a, b = _rows(tmp_path / "straight"), _rows(tmp_path / "resumed")
    for key in ("val_acc", "test_acc", "val_loss"):
        assert [r[key] for r in a] == [r[key] for r in b], key


def test_kept_momentum_is_refused_where_it_cannot_be_kept(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # engine=pool is a CPU engine (on an accelerator it is refused for that first)
    assert main(["run", "device=cpu", "engine=pool", "client_momentum=keep", "rounds=1", "progress=false",
                 f"out={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "client_momentum=keep" in err[0] and "engine=dense" in err[0]


def test_kept_momentum_with_a_cnn_on_the_cpu_runs_one_loop_per_client(tmp_path: Path) -> None:
    """engine=auto would give a CNN on the CPU the process pool, whose workers cannot keep the buffers: with
    client_momentum=keep it runs the per-client loop (what the pool's workers run) instead of refusing."""
    from fedcluster.config.run_config import load_raw, resolve
    from fedcluster.engine.runner import Run

    cfg, typed = resolve(load_raw(None, ["model=light-cnn", "client_momentum=keep", "rounds=1", "progress=false",
                                         "device=cpu", f"out={tmp_path / 'r'}"]))
    run = Run(cfg, typed)
    assert run.engine_path == "sequential"
    run.execute()


def test_training_outside_the_rounds_keeps_no_buffer() -> None:
    """Evaluation-time training (stream 1, FedRC-FT's fine-tuning) starts from zero and leaves the buffers alone."""
    x, y, module, init = _data()
    clients, models = np.array([0, 1, 2, 3, 1]), np.array([0, 1, 0, 1, 0])
    t = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="dense", client_momentum="keep")
    t.train(init, clients, SOLVER, 0, init_index=models)
    kept = {k: v.clone() for k, v in t.momentum.buffers.items()}
    tuned = t.train(init, clients, SOLVER, 1, init_index=models, stream=1)
    fresh = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="dense").train(
        init, clients, SOLVER, 1, init_index=models, stream=1)
    assert _gap(tuned, fresh) == 0.0
    assert _gap(t.momentum.buffers, kept) == 0.0
