"""The training round's bookkeeping does not change its numbers: the sequential path trains in its result rows and
in the kept momentum buffers in place and reuses its result stack across folded calls, the non-finite watch reduces
unit by unit on the CPU, and the CPU E-step re-freezes kept traces (engine.trainers.local, engine.training,
engine.evaluation.inference)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.engine.evaluation.inference import StackForward, _frozen
from fedcluster.engine.params import Params, get_params, stack
from fedcluster.engine.solver import Solver
from fedcluster.engine.trainers.local import LocalTrainer
from fedcluster.engine.training.momentum import ClientMomentum
from fedcluster.models.base import build_model

SOLVER = Solver(lr=0.1, momentum=0.9, weight_decay=5e-4, batch_size=16)
PTR = np.array([0, 50, 120, 200, 300])
HOST_ONLY = pytest.mark.host_only(reason="models and inputs built by the test on the host, used there")


def _data(model: str = "mlp") -> tuple[torch.Tensor, torch.Tensor, torch.nn.Module, Params]:
    torch.manual_seed(0)
    x, y = torch.randn(300, 1, 8, 8), torch.randint(0, 4, (300,))
    params = {"hidden": [16]} if model == "mlp" else {"channels": [4, 8], "fc": 16}
    models = [build_model(model, (1, 8, 8), 4, params) for _ in range(2)]
    return x, y, models[0], stack([get_params(m) for m in models])


class _Kept:
    """Sums that keep a copy of every unit (what a method would have received)."""

    group = 1

    def __init__(self) -> None:
        self.parts: list[Params] = []

    def add(self, lo: int, hi: int, trained: Params) -> None:
        self.parts.append({k: v.clone() for k, v in trained.items()})

    def stack(self) -> Params:
        return {k: torch.cat([p[k] for p in self.parts]) for k in self.parts[0]}


@HOST_ONLY
def test_folded_sequential_rounds_equal_fresh_training_with_kept_momentum() -> None:
    """Three rounds through train_folded (result stack reused, momentum in place) == three rounds of train()
    (a fresh stack each call): every unit and every kept buffer bit for bit."""
    x, y, module, init = _data()
    clients, models = np.array([0, 1, 2, 3, 1]), np.array([0, 1, 0, 1, 0])
    folded = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="sequential", client_momentum="keep")
    fresh = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="sequential", client_momentum="keep")
    for round_ in range(3):
        kept = _Kept()
        folded.train_folded(kept, init, clients, SOLVER, round_, init_index=models)
        want = fresh.train(init, clients, SOLVER, round_, init_index=models)
        got = kept.stack()
        assert all(torch.equal(got[k], want[k]) for k in want)
    assert folded._scratch is not None  # the stack was kept for reuse
    assert all(torch.equal(folded.momentum.buffers[k], fresh.momentum.buffers[k]) for k in fresh.momentum.buffers)
    assert all(float(v.abs().sum()) > 0 for v in folded.momentum.buffers.values())  # the buffers were kept


def test_momentum_gather_hands_out_views_for_consecutive_keys_only() -> None:
    store = ClientMomentum(torch.device("cpu"))
    like = {"w": torch.zeros(3, 4)}
    keys = [(0, 5, 0), (0, 5, 1), (0, 7, 0)]
    store.gather(keys, like)  # first sight: zeros
    device = store.buffers["w"].device  # the store's device (a simulated accelerator under --strict-device)
    views = store.gather(keys, like)
    assert views["w"].data_ptr() == store.buffers["w"].data_ptr()
    views["w"].add_(1.0)  # training updates the views in place; put then copies nothing
    store.put(keys, views)
    assert torch.equal(store.buffers["w"].cpu(), torch.ones(3, 4))
    shuffled = [keys[2], keys[0]]
    copies = store.gather(shuffled, like)
    assert copies["w"].data_ptr() != store.buffers["w"][2].data_ptr()
    store.put(shuffled, {"w": torch.full((2, 4), 5.0, device=device)})
    assert store.buffers["w"][:, 0].cpu().tolist() == [5.0, 1.0, 5.0]


def test_watch_finds_the_non_finite_units_and_their_peaks() -> None:
    x, y, module, init = _data()
    t = LocalTrainer(module, x, y, PTR, "classification", seed=0, path="sequential")
    out = {k: torch.randn(4, *v.shape[1:], device=x.device) for k, v in init.items()}
    first = next(iter(out))
    out[first][1].view(-1)[3] = float("nan")
    out[first][2].view(-1)[0] = float("-inf")
    t._watch(out, np.array([10, 11, 12, 13]))
    (clients, peaks), = t.take_watch()
    want = torch.stack([v.reshape(4, -1).abs().amax(1) for v in out.values()]).amax(0)
    assert torch.equal(torch.isnan(peaks), torch.isnan(want))
    finite = torch.isfinite(want)
    assert torch.equal(peaks[finite], want[finite]) and float(peaks[2]) == float("inf")
    t._watch(out, np.array([10, 11, 12, 13]))
    assert t.take_nonfinite() == [11, 12]


@HOST_ONLY
def test_rebuilt_frozen_forwards_equal_fresh_ones_and_leave_earlier_ones_alone() -> None:
    """A kept trace frozen with new weights == a fresh trace's forward, bit for bit; a forward built before keeps
    its own weights."""
    x, _, module, a = _data("cnn")
    b = {k: v.flip(0).contiguous() for k, v in a.items()}
    fwd = StackForward(module)
    before = fwd(a, x)
    first = fwd._fns[0]
    after = fwd(b, x)
    assert torch.equal(first(x[:50]), before[0, :50])  # the earlier forward still holds a's weights
    for j in range(2):
        fresh = _frozen(module, {n: v[j] for n, v in b.items()}, x[:2])
        assert torch.equal(after[j], fresh(x))
