"""A split of which a process holds only some clients' inputs (data.sharded): the global layout stays, reading
another client's inputs raises, and the held rows are exactly the clients' own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.data.federation import Federation, Split
from fedcluster.data.sharded import NotHeldError, ShardedSplit, client_shard, read_share, shard_federation
from fedcluster.storage.state_file import StateFileError, StateParts


def _split() -> Split:
    sizes = [3, 0, 2, 4, 1]
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    x = torch.arange(10 * 4, dtype=torch.float32).view(10, 4)
    return Split(x, torch.arange(10) % 3, ptr, fit=np.arange(10) % 2 == 0)


def test_every_client_is_held_by_exactly_one_rank() -> None:
    held = np.stack([client_shard(7, r, 3) for r in range(3)])
    assert (held.sum(0) == 1).all()


def test_the_layout_stays_global_and_held_rows_are_the_clients_own() -> None:
    whole = _split()
    part = ShardedSplit.of(whole, client_shard(whole.num_clients, 0, 2))  # clients 0, 2, 4
    assert part.num_clients == 5 and part.num_samples == 10 and np.array_equal(part.sizes, whole.sizes)
    assert np.array_equal(part.owner(), whole.owner()) and torch.equal(part.y, whole.y)
    for c in (0, 2, 4):
        assert torch.equal(part.client(c)[0], whole.client(c)[0]) and torch.equal(part.client(c)[1], whole.client(c)[1])
    rows = np.array([9, 0, 3, 4])  # clients 4, 0, 2, 2
    assert torch.equal(part.take(rows), whole.x[torch.as_tensor(rows)])
    local = part.local()  # the same client ids, other clients without rows
    assert local.num_clients == 5 and local.sizes.tolist() == [3, 0, 2, 0, 1]
    assert torch.equal(local.x, whole.x[torch.as_tensor([0, 1, 2, 3, 4, 9])])
    assert np.array_equal(local.fit, whole.fit[[0, 1, 2, 3, 4, 9]])
    assert part.nbytes() == local.x.nbytes + whole.y.nbytes < whole.nbytes()


def test_reading_inputs_of_a_client_not_held_raises() -> None:
    whole = _split()
    part = ShardedSplit.of(whole, client_shard(whole.num_clients, 1, 2))  # clients 1 (no rows) and 3
    with pytest.raises(NotHeldError, match="client 0"):
        part.take(np.array([6, 0]))  # row 6 is client 3's, row 0 client 0's
    with pytest.raises(NotHeldError, match="client 2"):
        part.client(2)
    with pytest.raises(NotHeldError):
        part.x  # noqa: B018 (code written for a whole split must not read the held rows as if they were all)
    assert torch.equal(part.take(np.array([8, 5])), whole.x[torch.as_tensor([8, 5])])


def _federation() -> Federation:
    train = _split()
    val = Split(train.x[:5] + 0.5, train.y[:5], np.array([0, 1, 1, 2, 4, 5]))
    test = Split(train.x[:6] - 1.0, train.y[:6], np.array([0, 2, 3, 6]))
    return Federation(train, val, test, np.array([0, 1, 0, 1, 0]), np.array([0, 1, 2]), num_classes=3,
                      extras={"theta_star": np.ones((2, 4))})


@pytest.mark.parametrize("chunk", [8, 2**20])  # the checksum streamed over several reads, or one
def test_a_rank_reads_only_its_clients_inputs_from_the_cache_file(tmp_path: Path, chunk: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StateParts, "CHUNK", chunk)
    fed, path = _federation(), tmp_path / "fed.safetensors"
    fed.save(path, "k")
    for rank in (0, 1):
        share, expected = read_share(path, "k", rank, 2), shard_federation(Federation.load(path, "k"), rank, 2)
        for name in ("train", "val", "test"):
            a, b = getattr(share, name), getattr(expected, name)
            assert torch.equal(a.x_held, b.x_held) and torch.equal(a.y, b.y) and np.array_equal(a.held, b.held)
        assert np.array_equal(share.extras["theta_star"], fed.extras["theta_star"])
    with pytest.raises(StateFileError, match="another configuration"):
        read_share(path, "other", 0, 2)
    data = bytearray(path.read_bytes())
    data[-3] ^= 1  # one bit of a tensor's data
    path.write_bytes(bytes(data))
    with pytest.raises(StateFileError, match="checksum"):
        read_share(path, "k", 0, 2)
