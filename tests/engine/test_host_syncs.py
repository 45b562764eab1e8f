"""Host syncs per round on an accelerator (simulated: tests/support/fake_device.py counts every read of a device tensor
on the host and every blocking copy of host data to the device, each of which makes the host wait for the GPU). A round
of FedAvg, IFCA, FedEM and FedRC, its evaluation included, makes at most ``MAX_SYNCS``: the E-step's losses come
back once, the metrics rows once, the divergence check once; labels, weights and schedules go to the device
without waiting."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.build import build_federation
from fedcluster.engine.runner import Run
from tests.support.fake_device import FakeDevice

MAX_SYNCS = 3


def _syncs_per_round(tmp_path: Path, fake: FakeDevice, algorithm: str, monkeypatch: pytest.MonkeyPatch
                     ) -> tuple[float, Counter]:
    cfg, typed = resolve(load_raw(None, [f"algorithm={algorithm}", "num_clients=6", "rounds=4", "progress=false",
                                         "model.hidden=[16]", "checkpoint_every=100", f"out={tmp_path / algorithm}"]))
    run = Run(cfg, typed, fed=build_federation(cfg, typed["scenario"]))
    marks: list[tuple[int, int]] = []
    play = Run.play_round

    def marked(self: Run, t: int):
        marks.append((fake.syncs, len(fake.sync_sites)))
        return play(self, t)

    monkeypatch.setattr(Run, "play_round", marked)
    run.execute()
    (s1, i1), (s3, i3) = marks[1], marks[3]  # rounds 2 and 3, each with its evaluation and its row
    return (s3 - s1) / 2, Counter(fake.sync_sites[i1:i3])


@pytest.mark.parametrize("algorithm", ["fedavg", "ifca", "fedem", "fedrc"])
def test_a_round_makes_at_most_three_host_syncs(tmp_path: Path, strict_device: FakeDevice, algorithm: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    per_round, sites = _syncs_per_round(tmp_path, strict_device, algorithm, monkeypatch)
    assert per_round <= MAX_SYNCS, "\n".join(f"{n // 2} × {s}" for s, n in sites.most_common())
    assert not strict_device.problems, "\n".join(sorted(set(strict_device.problems)))
