"""A round's host-side layout: make_schedule's batches are, entry for entry, those of laying out every unit's steps
one by one from its client's order (the reference below; uneven, empty and tiny clients, several epochs, drop_last
and max_steps, units of one client sharing its order, in any order); build_batch gathers the units' sample weights
in one indexing, the same as indexing each unit's own weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedcluster.engine.params import get_params, stack
from fedcluster.engine.training.batches import client_order, make_schedule
from fedcluster.engine.training.kernels import build_batch
from fedcluster.models import build_model


def _per_unit(sizes: np.ndarray, clients: np.ndarray, seed: int, round_: int, epochs: int, batch_size: int,
              stream: int, max_steps: int | None, drop_last: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every unit's steps laid out one by one: a step is the next ``batch_size`` samples of its pass."""
    per_epoch = [int(sizes[c] // batch_size if drop_last else np.ceil(sizes[c] / batch_size)) for c in clients]
    steps = np.array([p * epochs for p in per_epoch], dtype=np.int64)
    if max_steps is not None:
        steps = np.minimum(steps, max_steps)
    S, B = int(steps.max(initial=1)), batch_size
    local = np.zeros((len(clients), S, B), dtype=np.int64)
    mask = np.zeros((len(clients), S, B), dtype=np.float32)
    for u, c in enumerate(clients):
        order, n = client_order(seed, round_, int(c), stream, int(sizes[c]), epochs), int(sizes[c])
        for s in range(steps[u]):
            e, k = divmod(s, per_epoch[u])
            chunk = order[e * n + k * B: e * n + min((k + 1) * B, n)]
            local[u, s, :len(chunk)] = chunk
            mask[u, s, :len(chunk)] = 1.0
    return local, mask, steps


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("case", range(12))
def test_the_layout_is_the_per_unit_one(case: int, drop_last: bool) -> None:
    rng = np.random.default_rng(case)
    sizes = rng.integers(0, 60, size=9)
    sizes[rng.integers(0, 9)] = 0  # a client with no samples
    clients = rng.permutation(np.repeat(np.arange(9), rng.integers(1, 4)))[: rng.integers(1, 20)]
    epochs, batch = int(rng.integers(1, 4)), int(rng.choice([1, 4, 7, 16, 64]))
    max_steps = None if case % 3 else int(rng.integers(1, 6))
    args = (sizes, clients, case, int(rng.integers(0, 50)), epochs, batch, case % 2, max_steps, drop_last)
    got = make_schedule(*args)
    local, mask, steps = _per_unit(*args)
    np.testing.assert_array_equal(got.local.numpy(), local)
    np.testing.assert_array_equal(got.mask.numpy(), mask)
    np.testing.assert_array_equal(got.steps, steps)
    assert got.local.numpy().dtype == local.dtype and got.mask.numpy().dtype == mask.dtype
    assert got.steps.dtype == steps.dtype


def test_no_units_give_an_empty_schedule() -> None:
    got = make_schedule(np.array([5, 7]), np.array([], dtype=np.int64), 0, 0, 1, 4)
    assert got.local.shape == (0, 1, 4) and got.steps.shape == (0,)


@pytest.mark.parametrize("heads", [None, 3])
def test_sample_weights_are_gathered_as_unit_by_unit(heads: int | None) -> None:
    rng = np.random.default_rng(0)
    sizes = np.array([5, 0, 9, 3])
    clients = np.array([2, 0, 2, 1, 3, 0])
    schedule = make_schedule(sizes, clients, 0, 0, 2, 4)
    shape = (lambda n: (n,)) if heads is None else (lambda n: (n, heads))
    weights = [rng.random(shape(int(sizes[c]))) for c in clients]  # float64, as the methods' responsibilities
    init = stack([get_params(build_model("logistic", (2,), 2))])
    got = build_batch(init, clients, np.concatenate([[0], np.cumsum(sizes)]), schedule, weights, None,
                      init_index=np.zeros(len(clients), dtype=np.int64)).weight
    mask = schedule.mask if heads is None else schedule.mask.unsqueeze(-1)
    for u, wu in enumerate(weights):
        if len(wu):
            ref = torch.as_tensor(wu, dtype=torch.float32)[schedule.local[u]] * mask[u]
        else:  # a client with no samples takes no step
            ref = torch.zeros_like(got[u].cpu())
        assert torch.equal(got[u].cpu(), ref)
