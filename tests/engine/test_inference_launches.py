"""Inference on an accelerator is vectorised: the forward calls of an E-step and an evaluation do not grow with
the number of clients or models, and the rows per call follow the free memory. The accelerator is simulated
on the CPU by giving ``evaluation.inference.row_budget`` a free-memory figure (what CUDA's mem_get_info gives)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.evaluation import inference
from fedcluster.engine.evaluation.inference import CHUNK, StackForward, inference_rows
from fedcluster.engine.evaluation.scores import model_outputs
from fedcluster.engine.memory import inference_row_bytes
from fedcluster.engine.params import get_params, stack
from fedcluster.engine.runner import Run, evaluate
from fedcluster.models import build_model

GIB = 2**30
DEVICE = torch.device("cpu")  # the run's device (named, so that the simulated accelerator counts these tensors its own)


@pytest.fixture
def forwards(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Simulate an accelerator with 1 GiB free and count the model forward calls of engine.evaluation.inference."""
    calls = [0]
    real = inference.functional_call

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(inference, "row_budget", lambda device: 1 * GIB)
    monkeypatch.setattr(inference, "functional_call", counted)
    return calls


def _launches(algorithm: str, clients: int, tmp_path: Path, calls: list[int]) -> tuple[int, int]:
    """Forward calls of one E-step (over every client's training rows) and of one evaluation, and the rows."""
    cfg, typed = resolve(load_raw(None, [
        f"algorithm={algorithm}", f"num_clients={clients}", "device=cpu", "progress=false", "rounds=2",
        "model.hidden=[16]", f"out={tmp_path / f'{algorithm}-{clients}'}", "threads=1"]))
    run = Run(cfg, typed)
    try:
        run.play_round(0)  # every client trained once: the evaluation needs no extra pass for unseen clients
        rows, _ = run.alg.rows(np.arange(clients))
        calls[0] = 0
        run.alg.losses(rows)  # the clients' E-step work
        evaluate(run.alg, run.fed)  # validation and test predictions
        return calls[0], len(rows)
    finally:
        run.ctx.trainer.close()
        run.dir.release()


@pytest.mark.parametrize("algorithm", ["ifca", "fedrc"])
def test_e_step_and_evaluation_forward_calls_do_not_grow_with_clients(algorithm: str, tmp_path: Path,
                                                                      forwards: list[int]) -> None:
    few, few_rows = _launches(algorithm, 4, tmp_path, forwards)
    many, many_rows = _launches(algorithm, 40, tmp_path, forwards)
    assert many_rows > 3 * CHUNK  # chunks of CHUNK rows, or one call per model, would show below
    assert few == many == 3, (few, many)  # one vmapped call each: the E-step, the validation, the test split


def test_vectorised_forward_matches_the_per_model_one(forwards: list[int]) -> None:
    torch.manual_seed(0)
    for name in ("mlp", "light-cnn"):
        module = build_model(name, (1, 12, 12), 10)
        models = stack([get_params(build_model(name, (1, 12, 12), 10)) for _ in range(3)])
        x = torch.rand(300, 1, 12, 12, device=DEVICE)
        ref = torch.stack([torch.func.functional_call(module, {n: v[k] for n, v in models.items()}, (x,))
                           for k in range(3)])
        forwards[0] = 0
        torch.testing.assert_close(StackForward(module)(models, x), ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(StackForward(module)(models, x, chunk=7), ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model_outputs(module, models, x), ref, rtol=1e-5, atol=1e-5)
        assert forwards[0] == 1 + 43 + 1  # whole / 300 rows in chunks of 7 / whole
        for n, v in models.items():  # shared body: body of model 0, each model's head
            if n.startswith("body."):
                v[1:] = v[0]
        ref = torch.stack([torch.func.functional_call(module, {n: v[k] for n, v in models.items()}, (x,))
                           for k in range(3)])
        torch.testing.assert_close(StackForward(module)(models, x, shared_body=True), ref, rtol=1e-5, atol=1e-5)


def test_rows_per_call_follow_the_free_memory() -> None:
    """Light CNN on 1×28×28, K = 3: rows per call scale with the free memory, far above the CPU's CHUNK."""
    module = build_model("light-cnn", (1, 28, 28), 10)
    row = inference_row_bytes(module, (1, 28, 28))
    assert 10_000 < row < 2**20  # a few hundred KiB of activations per row
    assert inference_rows(70 * GIB, 3, row) > 50_000  # an H100: a paper-scale E-step (48,000 rows) in one call
    assert inference_rows(GIB, 3, row) == GIB // (3 * row)
    assert inference_rows(8 * GIB, 3, row) == pytest.approx(8 * inference_rows(GIB, 3, row), rel=1e-3)
    assert inference_rows(GIB, 3, row, fixed=GIB) == 1  # never less than one row


@pytest.mark.parametrize("algorithm", ["fedrc", "ifca", "fedrc algorithm.ft=true", "fedsoft", "stocfl",
                                       "hcfl-plus", "hcfl algorithm.split=false"])
def test_the_vectorised_inference_keeps_its_tensors_on_the_runs_device(algorithm: str, tmp_path: Path,
                                                                       forwards: list[int]) -> None:
    """The accelerator path under the CPU's strict stand-in for a GPU (tests/support/fake_device.py): a whole run with
    vectorised E-steps and evaluations mixes no host and device tensors and reads none without .cpu()."""
    from fedcluster.data.build import build_federation
    from tests.support.fake_device import FakeDevice

    cfg, typed = resolve(load_raw(None, [
        f"algorithm={algorithm.split()[0]}", *algorithm.split()[1:], "num_clients=6", "device=cpu", "progress=false",
        "rounds=2", "model=light-cnn", "engine=vectorized", f"out={tmp_path / 'run'}", "threads=1"]))
    fed = build_federation(cfg, typed["scenario"])
    with FakeDevice(strict=True) as fake:  # factories without a device make host tensors, as on a GPU
        Run(cfg, typed, fed=fed).execute()
    assert forwards[0] > 0  # the vectorised path ran
    assert not fake.problems, "\n".join(sorted(set(fake.problems)))


def _trained_run(items: list[str], clients: int, tmp_path: Path, name: str) -> Run:
    cfg, typed = resolve(load_raw(None, [
        *items, f"num_clients={clients}", "device=cpu", "progress=false", "rounds=2", "model.hidden=[16]",
        f"out={tmp_path / f'{name}-{clients}'}", "threads=1"]))
    run = Run(cfg, typed)
    run.play_round(0)
    return run


def _close(run: Run) -> None:
    run.ctx.trainer.close()
    run.dir.release()


# own models per client (FedRC-FT, FedSoft), one model per hard cluster (StoCFL: a cluster per client at first)
PERSONAL = {"fedrc-ft": ["algorithm=fedrc", "algorithm.ft=true"], "fedsoft": ["algorithm=fedsoft"],
            "stocfl": ["algorithm=stocfl"], "pacfl": ["algorithm=pacfl"]}


@pytest.mark.parametrize("name", list(PERSONAL))
def test_personal_and_hard_cluster_predictions_are_one_forward_call(name: str, tmp_path: Path,
                                                                    forwards: list[int]) -> None:
    """Each client's own (fine-tuned, personal) models, or each cluster's model on its members' rows: one
    vmapped call for the whole split, not one per client or per cluster."""
    counts = []
    for clients in (4, 40):
        run = _trained_run(PERSONAL[name], clients, tmp_path, name)
        try:
            split = run.fed.val
            forwards[0] = 0
            pred = run.alg.predict(split, True)
            counts.append(forwards[0])
            if name in ("stocfl", "pacfl"):
                assert len(np.unique(run.alg.cluster)) > 1  # per-cluster calls would show
            assert pred.shape[0] == len(split.x) and torch.isfinite(pred).all()
        finally:
            _close(run)
    assert counts == [1, 1], counts


def test_personal_outputs_match_the_per_client_forward(tmp_path: Path, forwards: list[int]) -> None:
    """The vmapped own_outputs and hard-cluster predictions equal the per-client / per-cluster CPU ones."""
    for name in ("fedrc-ft", "stocfl"):
        run = _trained_run(PERSONAL[name], 6, tmp_path, name)
        try:
            fast = run.alg.predict(run.fed.val, True)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(inference, "row_budget", lambda device: None)  # the CPU path
                slow = run.alg.predict(run.fed.val, True)
            torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
        finally:
            _close(run)


@pytest.mark.parametrize("shared", [True, False])
def test_body_features_of_a_cohort_are_one_forward_call(shared: bool, forwards: list[int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """BodyFeatures.cohort (HCFL+ prototypes): one vmapped call over the bodies of the rows' clusters, whatever
    the number of rows (chunks of 4096 on the CPU) or clusters, when the memory holds them (8 GiB free here);
    the same features as the per-cluster path."""
    monkeypatch.setattr(inference, "row_budget", lambda device: 8 * GIB)
    from fedcluster.engine.evaluation.features import CHUNK as FEATURE_CHUNK
    from fedcluster.engine.evaluation.features import BodyFeatures

    torch.manual_seed(0)
    module = build_model("light-cnn", (1, 12, 12), 10)
    models = stack([get_params(build_model("light-cnn", (1, 12, 12), 10)) for _ in range(3)])
    counts = []
    for clients in (4, 40):
        rows_per_client = 300
        x = torch.rand(clients * rows_per_client, 1, 12, 12, device=DEVICE)
        rng = np.random.default_rng(clients)
        rows = rng.permutation(len(x))
        position = np.repeat(rng.integers(0, 3, clients), rows_per_client)
        features = BodyFeatures(module)
        forwards[0] = 0
        z = features.cohort(models, x, rows, position, shared)
        counts.append(forwards[0])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(inference, "row_budget", lambda device: None)
            ref = BodyFeatures(module).cohort(models, x, rows, position, shared)
        torch.testing.assert_close(z, ref, rtol=1e-4, atol=1e-5)
    assert clients * rows_per_client > 2 * FEATURE_CHUNK
    assert counts == [1, 1], counts


def test_grouped_forward_matches_each_units_models_and_follows_the_free_memory(
        forwards: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """StackForward.grouped: row r through the K' models of unit group[r] (rows unordered, a unit without rows);
    as many units per call as the free memory holds, and rows split across calls when one unit's do not fit."""
    torch.manual_seed(0)
    module = build_model("light-cnn", (1, 12, 12), 10)
    units, kk, per_unit = 6, 2, 20
    models = stack([get_params(build_model("light-cnn", (1, 12, 12), 10)) for _ in range(units * kk)])
    models = {n: v.view(units, kk, *v.shape[1:]) for n, v in models.items()}
    x = torch.rand(200, 1, 12, 12, device=DEVICE)
    rng = np.random.default_rng(0)
    group = rng.permutation(np.repeat(np.arange(units - 1), per_unit))  # the last unit has no rows
    rows = rng.permutation(len(x))[:len(group)]
    ref = torch.stack([torch.cat([torch.func.functional_call(module, {n: v[g, k] for n, v in models.items()},
                                                             (x[r:r + 1],)) for r, g in zip(rows, group, strict=True)])
                       for k in range(kk)])
    row_bytes = kk * inference_row_bytes(module, (1, 12, 12))
    unit_bytes = sum(v[0].numel() * v.element_size() for v in models.values())
    for budget, calls in ((GIB, 1), (2 * (per_unit * row_bytes + unit_bytes), 3),
                          (unit_bytes + 10 * row_bytes, 5 * 2)):  # 2 units per call; 10 of a unit's 20 rows
        monkeypatch.setattr(inference, "row_budget", lambda device, b=budget: b)
        forwards[0] = 0
        out = StackForward(module).grouped(models, x, rows, group)
        assert forwards[0] == calls, (budget, forwards[0])
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
