"""Several runs on one accelerator (``fedcluster reproduce --workers N --device cuda``): the free memory read once
and split between the workers, each planning with its share (never over-committing the card), and a share that
cannot hold one training unit refused in one line. On a simulated accelerator memory (no GPU needed)."""

from __future__ import annotations

import math

import pytest
import torch

from fedcluster.engine import budget, memory
from fedcluster.errors import ResourceError, UserError
from fedcluster.reproduce.experiments import get
from fedcluster.reproduce.parallel import parts, run_parts
from fedcluster.reproduce.running import device_shares
from tests.engine.test_memory_plan import GIB, _table1, simulate_device

H200 = 139 * GIB


def test_a_share_caps_what_the_plan_counts_as_available(monkeypatch: pytest.MonkeyPatch) -> None:
    simulate_device(monkeypatch, total=H200, free=120 * GIB, cached=4 * GIB, allocated=2 * GIB)
    device = torch.device("cuda")
    assert memory.device_memory(device).available == 124 * GIB  # no share: all it finds
    monkeypatch.setenv(memory.SHARE_VARIABLE, str(30 * 1024))
    mem = memory.device_memory(device)
    assert mem.available == 28 * GIB  # the 30 GiB share less the 2 GiB this process holds
    assert "share of the device is 30.0 GiB" in mem.describe() and "fewer --workers" in mem.describe()


def test_the_free_memory_is_split_once_between_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    simulate_device(monkeypatch, total=H200, free=130 * GIB, cached=0, allocated=0)
    env = device_shares("cuda", 4)
    share = int(env[memory.SHARE_VARIABLE]) * 2**20
    assert share == (130 * GIB - 4 * memory.CONTEXT_BYTES) // 4
    assert 4 * (share + memory.CONTEXT_BYTES) <= 130 * GIB  # four workers never over-commit the card
    assert device_shares("cpu", 4) == {}


def test_too_many_workers_for_the_card_are_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    simulate_device(monkeypatch, total=16 * GIB, free=8 * GIB, cached=0, allocated=0)
    with pytest.raises(UserError, match="--workers 8: .* too little for 8 runs at once.*use fewer --workers") as e:
        device_shares("cuda", 8)
    assert "\n" not in str(e.value)


def test_a_share_that_cannot_hold_one_unit_is_refused_before_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """FedRC at the Table 1 scale with the paper's CNN fits a whole H200, and fits a quarter of it; a share of
    64 MiB cannot hold one training unit beside the round's state: refused, naming the share and the fix."""
    simulate_device(monkeypatch, total=H200, free=130 * GIB, cached=0, allocated=0)
    cfg, typed, fed = _table1()
    budget.fit_run(cfg, typed, fed)
    monkeypatch.setenv(memory.SHARE_VARIABLE, str(int(device_shares("cuda", 4)[memory.SHARE_VARIABLE])))
    budget.fit_run(cfg, typed, fed)  # a quarter of the card
    est = memory.estimate_training(cfg, typed, fed, 3, 300, streamed=True)
    quarter = memory.device_memory(torch.device("cuda")).available
    assert est.plan(quarter).fits and est.plan(quarter).peak <= quarter
    monkeypatch.setenv(memory.SHARE_VARIABLE, "64")
    with pytest.raises(ResourceError, match="share of the device is 64.0 MiB.*fewer --workers") as e:
        budget.fit_run(cfg, typed, fed)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad", ["", "lots", "-5", "0", "nan", "inf"])
def test_a_bad_share_is_one_line(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    simulate_device(monkeypatch, total=H200, free=130 * GIB, cached=0)
    monkeypatch.setenv(memory.SHARE_VARIABLE, bad)
    with pytest.raises(UserError, match=f"{memory.SHARE_VARIABLE}=.*positive number of MiB"):
        memory.device_memory(torch.device("cuda"))


@pytest.mark.host_only(reason="its worker processes run outside the simulated accelerator")
def test_two_workers_each_plan_with_their_share() -> None:
    exp = get("s3-mixture-kappa")
    got: list[dict] = []
    run_parts("tests.support.reproduce_fake_runner:share_run", exp.name, "small", parts(exp, {0: set()}), [],
              got.append, 2, env={memory.SHARE_VARIABLE: "20000"})
    assert len(got) == len(exp.pairs()) and {r["metrics"]["share"] for r in got} == {20000.0}
    assert not math.isnan(got[0]["metrics"]["share"])
