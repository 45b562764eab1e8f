"""FedRC-FT's global accuracy: the average of the one-epoch γ-weighted fine-tuned models by N_i is close to one more
FedRC round, so it scores near FedRC; and the reproduction reads FedRC-FT at FedRC's best-train round, as the FedRC
paper ("We report FedRC-FT by fine-tuning FedRC for one local epoch")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.runner import Run
from fedcluster.reproduce import run_suite
from fedcluster.reproduce.experiments import get


def _rounds(tmp: Path, seed: int, *extra: str) -> list[dict[str, float]]:
    cfg, typed = resolve(load_raw(None, ["progress=false", "threads=1", f"out={tmp}", "algorithm=fedrc",
                                         "num_clients=12", "rounds=12", "lr=0.1", "momentum=0.9", f"seed={seed}",
                                         *extra]))
    run = Run(cfg, typed)
    run.execute()
    return run.dir.read_rounds()


def test_fedrc_ft_global_accuracy_is_near_fedrcs_round_by_round(tmp_path: Path) -> None:
    """Over the second half of the run, the fine-tuned average's test accuracy stays within 5 points of FedRC's
    on average (3 seeds); it is one more γ-weighted local epoch, averaged as FedRC averages."""
    gaps = []
    for seed in range(3):
        plain = _rounds(tmp_path / f"plain{seed}", seed)
        tuned = _rounds(tmp_path / f"ft{seed}", seed, "algorithm.ft=true")
        late = [(a["test_acc"], b["test_acc"]) for a, b in zip(plain, tuned, strict=True) if a["round"] > 6]
        gaps += [abs(a - b) for a, b in late]
    assert 100 * float(np.mean(gaps)) <= 5.0, gaps


def _fake_rows(best_train_round: int, test_at: dict[int, float]) -> list[dict[str, float]]:
    return [{"round": t, "train_acc": 0.9 if t == best_train_round else 0.5, "val_acc": 0.5 + t / 100,
             "test_acc": test_at.get(t, 0.1), "ari": 0.0} for t in range(1, 11)]


@pytest.mark.parametrize("fedrc_done", [False, True])
def test_the_table_reads_fedrc_ft_at_fedrcs_best_train_round(monkeypatch: pytest.MonkeyPatch,
                                                              fedrc_done: bool) -> None:
    """FedRC's training accuracy peaks at round 8; FedRC-FT's own (fine-tuned, scored on the data it was just
    fitted to) at round 2. FedRC-FT is read at round 8, also when FedRC's record came from an earlier call."""
    exp = get("s4-table1-fmnist")
    exp = replace(exp, methods=tuple(m for m in exp.methods if m.label in ("FedRC", "FedRC-FT")))
    rows = {"FedRC": _fake_rows(8, {8: 0.70}), "FedRC-FT": _fake_rows(2, {2: 0.30, 8: 0.71})}

    def fake_execute(overrides, fed):  # type: ignore[no-untyped-def]
        return {}, rows["FedRC-FT" if "algorithm.ft=true" in overrides else "FedRC"]

    monkeypatch.setattr(run_suite, "execute", fake_execute)
    monkeypatch.setattr(run_suite, "federation_digest", lambda fed: "a stand-in federation")
    monkeypatch.setattr(run_suite, "build", lambda *a: type("Fed", (), {"train": type("S", (), {
        "sizes": np.array([10])})()})())
    records: list[dict] = []
    done = {("", "FedRC")} if fedrc_done else set()
    run_suite.run(exp, exp.budget("small"), 0, [], done, records.append)
    ft = next(r for r in records if r["method"] == "FedRC-FT")
    assert ft["metrics"]["round"] == 8 and ft["metrics"]["global"] == pytest.approx(71.0)
    assert [r["method"] for r in records] == (["FedRC-FT"] if fedrc_done else ["FedRC", "FedRC-FT"])
