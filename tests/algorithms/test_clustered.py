"""The fixed-K clustered methods end to end: CLI runs, checkpoints, known-answer clustering problems."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedcluster.algorithms.clustered import replace_solver
from fedcluster.algorithms.hcfl import RoundView
from fedcluster.algorithms.oneshot import kmeans_models
from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.engine.params import flatten
from fedcluster.engine.runner import Run
from fedcluster.engine.transfer import state_to_device
from fedcluster.storage.state_file import load_state, save_state
from fedcluster.tiers.weighting import fedsoft
from fedcluster.tracking.run_figures import report_run


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models: one intra-op thread is fastest, and on a busy 2-core machine several threads stall."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


METHODS = ["ifca", "fesem", "fedem", "fedrc", "fedsoft", "oneshot", "oracle"]


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "rounds.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("split", ["false", "true"])
@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_two_rounds(method: str, split: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["run", f"algorithm={method}", f"algorithm.split={split}", "rounds=2", f"out={out}",
                 "progress=false"]) == 0
    rows = _rows(out)
    assert len(rows) == 2 and all(float(r["num_clusters"]) == 3 for r in rows)
    assert all(int(r["bytes_up"]) > 0 and int(r["bytes_down"]) > 0 for r in rows)
    assert all(0 <= float(r["val_acc"]) <= 1 and 0 <= float(r["test_acc"]) <= 1 for r in rows)
    records = [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]
    assert [r["round"] for r in records] == [1, 2]


@pytest.mark.parametrize("method", METHODS)
def test_cluster_records_are_the_sample_weights_by_group(method: str, tmp_path: Path) -> None:
    """clusters.jsonl: mass[k][g] = Σ_{j in group g} γ_{j;k} of the current γ, every γ row is a distribution
    (so a group's mass over clusters is its sample count) and hard methods' rows are their clients' one-hot
    cluster."""
    run = _run([f"algorithm={method}", "rounds=2", "lr=0.3", f"out={tmp_path / 'run'}"])
    run.execute()
    gamma, fed = run.alg.gamma.astype(np.float64), run.fed
    np.testing.assert_allclose(gamma.sum(1), 1.0, rtol=1e-5)
    record = json.loads((tmp_path / "run" / "clusters.jsonl").read_text().splitlines()[-1])
    for key, groups in (("class", fed.train.y.cpu().numpy()), ("concept", fed.true_cluster[fed.train.owner()])):
        names = record[key]["names"]
        expected = np.stack([gamma[groups == int(n)].sum(0) for n in names], 1)  # [K, G]
        np.testing.assert_allclose(np.array(record[key]["mass"]), expected, rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(np.array(record[key]["mass"]).sum(0),
                                   [np.sum(groups == int(n)) for n in names], rtol=1e-5)
    if method not in ("fedem", "fedrc", "fedsoft"):
        owner = fed.train.owner()
        np.testing.assert_array_equal(gamma, np.eye(3)[run.alg.omega.argmax(1)][owner])
        assert set(np.unique(gamma)) <= {0.0, 1.0}
    else:
        assert not np.allclose(gamma, 1 / 3)  # the E-step moved them


def _one_round(overrides: list[str], tmp_path: Path, name: str) -> Run:
    run = _run([*overrides, "rounds=2", "lr=0.3", f"out={tmp_path / name}"])
    run.alg.run_round(0, run.stream[0])
    return run


def test_fedrc_variants_change_what_they_should(tmp_path: Path) -> None:
    """Adam moves γ differently and keeps its moments; TrHC trains and uploads one model per client; TeHC predicts
    with the argmax model only; FT changes the local predictions but not the models (S4 Table 15, H.3, H.5)."""
    base = _one_round(["algorithm=fedrc"], tmp_path, "base")
    adam = _one_round(["algorithm=fedrc", "algorithm.adam=true"], tmp_path, "adam")
    assert not np.allclose(adam.alg.gamma, base.alg.gamma) and np.abs(adam.alg.adam_m1).sum() > 0
    trhc = _one_round(["algorithm=fedrc", "algorithm.hard=train"], tmp_path, "trhc")
    res_base = base.alg.run_round(1, base.stream[1])
    res_tr = trhc.alg.run_round(1, trhc.stream[1])
    assert res_tr.bytes_up < res_base.bytes_up
    moved = [not torch.equal(trhc.alg.models["head.weight"][k], base.alg.models["head.weight"][k]) for k in range(3)]
    assert any(moved)
    tehc = _one_round(["algorithm=fedrc", "algorithm.hard=test"], tmp_path, "tehc")
    val = tehc.fed.val
    outputs = tehc.alg.outputs(val.x).softmax(-1)
    pick = tehc.alg.omega.argmax(1)[val.owner()]
    torch.testing.assert_close(tehc.alg.predict(val, True), outputs[pick, torch.arange(len(val.y))])
    assert not torch.allclose(tehc.alg.predict(val, True), _one_round(["algorithm=fedrc"], tmp_path, "b2").alg
                              .predict(val, True))
    ft = _one_round(["algorithm=fedrc", "algorithm.ft=true"], tmp_path, "ft")
    plain = _one_round(["algorithm=fedrc"], tmp_path, "plain")
    for n, v in plain.alg.models.items():
        torch.testing.assert_close(ft.alg.models[n], v, rtol=0, atol=0)
    assert not torch.allclose(ft.alg.predict(val, True), plain.alg.predict(val, True))


def test_fedem_variants_change_what_they_should(tmp_path: Path) -> None:
    """joint adds log p(x | k) to the E-step (other γ); sample scope keeps a per-sample prior mixed by μ̃."""
    base = _one_round(["algorithm=fedem"], tmp_path, "base")
    joint = _one_round(["algorithm=fedem", "algorithm.formulation=joint"], tmp_path, "joint")
    base.alg.run_round(1, base.stream[1])  # round 1 has no p(x | k) yet; round 2's E-step uses it
    joint.alg.run_round(1, joint.stream[1])
    assert joint.alg.density is not None and not np.allclose(joint.alg.gamma, base.alg.gamma)
    sample = _one_round(["algorithm=fedem", "algorithm.weights_scope=sample", "algorithm.mu_tilde=0.4"],
                        tmp_path, "sample")
    prior = sample.alg.sample_prior
    assert prior is not None and not np.allclose(prior, 1 / 3)
    rows, owner = sample.alg.rows(sample.stream[0])
    spread = [prior[rows][owner == i].std(0).max() for i in range(3)]
    assert max(spread) > 1e-4  # per-sample weights differ within a client (client scope: one row per client)


def test_gradient_ifca_takes_one_full_batch_step(tmp_path: Path) -> None:
    """IFCA option I (S3): θ_k ← θ_k − η Σ_{i∈k} N_i ∇F_i(θ_k) / Σ_{i∈k} N_i, one full-batch gradient each."""
    run = _run(["algorithm=ifca", "algorithm.variant=gradient", "rounds=1", "lr=0.3", f"out={tmp_path / 'g'}"])
    before = {n: v.clone() for n, v in run.alg.models.items()}
    clients = run.stream[0]
    run.alg.run_round(0, clients)
    assign, tr = run.alg.omega.argmax(1), run.fed.train
    for k in np.unique(assign[clients]):
        members = clients[assign[clients] == k]
        params = {n: v[k].clone().requires_grad_(True) for n, v in before.items()}
        rows = torch.as_tensor(np.concatenate([np.arange(tr.ptr[c], tr.ptr[c + 1]) for c in members]))
        out = torch.func.functional_call(run.ctx.module, params, (tr.x[rows],))
        loss = torch.nn.functional.cross_entropy(out, tr.y[rows])  # = Σ N_i F_i / Σ N_i
        grads = torch.autograd.grad(loss, list(params.values()))
        for (n, p), g in zip(params.items(), grads, strict=True):
            torch.testing.assert_close(run.alg.models[n][k], p.detach() - 0.3 * g, rtol=1e-4, atol=1e-5)


def test_report_draws_the_heatmaps(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["run", "algorithm=fedrc", "rounds=3", f"out={out}", "progress=false"]) == 0
    assert report_run(out) == 0
    assert (out / "clusters.png").stat().st_size > 0 and (out / "curves.png").stat().st_size > 0
    assert main(["report", str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize("method,extra", [(m, []) for m in METHODS] + [
    ("fedrc", ["algorithm.split=true"]), ("fedrc", ["algorithm.adam=true"]), ("fedrc", ["algorithm.ft=true"]),
    ("fedem", ["algorithm.weights_scope=sample"]), ("fedem", ["algorithm.formulation=joint"]),
    ("fedsoft", ["algorithm.split=true"]),
])
def test_checkpoint_state_round_trips(method: str, extra: list[str], tmp_path: Path) -> None:
    """Round 3 after saving and loading the state (in checkpoint.pt's format) equals round 3 in one go."""
    common = [f"algorithm={method}", *extra, "local_epochs=2", "lr=0.2", "rounds=3"]
    a = _run(common + [f"out={tmp_path / 'a'}"])
    for t in range(2):
        a.alg.run_round(t, a.stream[t])
    save_state(tmp_path / "state", a.alg.state_dict(), "checkpoint")  # the checkpoint's file format
    b = _run(common + [f"out={tmp_path / 'b'}"])
    b.alg.load_state_dict(state_to_device(load_state(tmp_path / "state", "checkpoint"), b.device))  # as a resume does
    ra, rb = a.alg.run_round(2, a.stream[2]), b.alg.run_round(2, b.stream[2])
    assert (ra.bytes_up, ra.bytes_down, ra.clusters) == (rb.bytes_up, rb.bytes_down, rb.clusters)
    for n, v in a.alg.models.items():
        torch.testing.assert_close(b.alg.models[n], v, rtol=0, atol=0)
    np.testing.assert_array_equal(a.alg.omega, b.alg.omega)
    for split, part in ((a.fed.val, True), (a.fed.test, False)):
        torch.testing.assert_close(a.alg.predict(split, part), b.alg.predict(split, part))
    a.ctx.trainer.close()
    b.ctx.trainer.close()


def test_resume_equals_straight_run(tmp_path: Path) -> None:
    """The CLI path: 3 rounds in one go == 2 rounds, then ``fedcluster resume`` for the 3rd."""
    common = ["algorithm=fedrc", "progress=false", "checkpoint_every=1", "local_epochs=2", "lr=0.2"]
    assert main(["run", *common, "rounds=3", f"out={tmp_path / 'straight'}"]) == 0
    assert main(["run", *common, "rounds=2", f"out={tmp_path / 'resumed'}"]) == 0
    assert main(["resume", str(tmp_path / "resumed"), "rounds=3"]) == 0
    a, b = _rows(tmp_path / "straight"), _rows(tmp_path / "resumed")
    for key in ("val_acc", "test_acc", "ari", "bytes_up", "bytes_down"):
        assert [r[key] for r in a] == [r[key] for r in b], key
    clusters = (tmp_path / "resumed" / "clusters.jsonl").read_text().splitlines()
    assert clusters == (tmp_path / "straight" / "clusters.jsonl").read_text().splitlines()


def _run(overrides: list[str]) -> Run:
    cfg, typed = resolve(load_raw(None, overrides + ["progress=false"]))
    if cfg.out is None:
        raise ValueError("tests pass out=")
    return Run(cfg, typed)


@pytest.mark.parametrize("variant", ["model", "gradient"])
def test_ifca_with_a_good_start_recovers_the_true_clusters(variant: str, tmp_path: Path) -> None:
    """Mixed linear regression (S2 config A, well separated θ*): IFCA started near θ* has ARI 1."""
    run = _run(["dataset=mixed-regression", "scenario=mixed-regression", "model=linear", "algorithm=ifca",
                f"algorithm.variant={variant}", "rounds=3", "lr=0.01", f"out={tmp_path}"])
    theta = torch.as_tensor(run.fed.extras["theta_star"], dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    start = (theta + 0.3 * theta.std() * torch.randn(theta.shape, generator=g)).unsqueeze(1)
    run.alg.models["head.weight"] = start.to(run.device)
    run.alg.models["head.bias"] = torch.zeros(len(theta), 1, device=run.device)
    run.execute()
    assert [float(r["ari"]) for r in _rows(tmp_path)] == [1.0, 1.0, 1.0]


def test_oracle_and_fesem_assignments(tmp_path: Path) -> None:
    run = _run(["algorithm=oracle", "rounds=1", f"out={tmp_path / 'o'}"])
    run.execute()
    np.testing.assert_array_equal(run.alg.assignment(), run.fed.true_cluster)
    with pytest.raises(Exception, match="num_clusters"):
        _run(["algorithm=oracle", "algorithm.num_clusters=2", f"out={tmp_path / 'o2'}"])
    # FeSEM: first seen → lowest loss; then argmin_k ‖θ_k − θ_i‖ to the models sent (S1 footnote 6)
    fesem = _run(["algorithm=fesem", "rounds=2", "lr=0.3", "local_epochs=2", "device=cpu", f"out={tmp_path / 'f'}"])
    alg, clients = fesem.alg, fesem.stream[0]
    rows, owner = alg.rows(clients)
    first = (-alg.losses(rows)).reshape(-1, 3)
    first = np.stack([first[owner == i].mean(0) for i in range(len(clients))]).argmax(1)
    for t in range(2):
        before = {n: v.clone() for n, v in alg.models.items()}
        start = first if t == 0 else alg.assigned[clients]
        local = alg.ctx.trainer.train({n: v[torch.as_tensor(start)] for n, v in before.items()}, clients,
                                      alg.ctx.solver, t)
        flat_local = torch.cat([local[n].reshape(len(clients), -1) for n in before], 1)
        flat_models = torch.cat([before[n].reshape(3, -1) for n in before], 1)
        expected = torch.cdist(flat_local.double(), flat_models.double()).argmin(1).numpy()
        alg.run_round(t, clients)
        np.testing.assert_array_equal(alg.assigned[clients], expected)
        for k in range(3):  # each centre: N_i-weighted mean of the local models assigned to it
            m = expected == k
            if m.any():
                w = torch.as_tensor(fesem.fed.train.sizes[clients][m], dtype=torch.float32)
                mean = (flat_local[torch.as_tensor(m)] * (w / w.sum())[:, None]).sum(0)
                flat_new = torch.cat([alg.models[n][k].reshape(-1) for n in before])
                torch.testing.assert_close(flat_new, mean, rtol=1e-4, atol=1e-5)


def test_soft_methods_send_k_models_and_hard_ones_upload_one(tmp_path: Path) -> None:
    sizes = {}
    for method in ("fedem", "ifca", "fedavg"):
        run = _run([f"algorithm={method}", "rounds=1", f"out={tmp_path / method}"])
        res = run.alg.run_round(0, run.stream[0])
        sizes[method] = (res.bytes_up, res.bytes_down)
    model = sizes["fedavg"][0]
    assert sizes["fedem"] == (3 * model, 3 * model)
    assert sizes["ifca"] == (model, 3 * model)


def _ari_after(method: str, seed: int, rounds: int, tmp_path: Path) -> float:
    run = _run([f"algorithm={method}", "dataset=digits", "scenario=concept-swap", "scenario.alpha=0.3",
                "num_clients=30", f"rounds={rounds}", "local_epochs=5", "lr=0.3", f"seed={seed}",
                f"eval_every={rounds}", f"out={tmp_path / f'{method}-{seed}'}"])
    return run.execute()["final"]["ari"]


def test_fedrc_separates_concepts_where_fedem_groups_by_label(tmp_path: Path) -> None:
    """Digits concept-swap (Dirichlet 0.3 label skew + 3 label-swap concepts, 30 clients): FedRC's 1/C_{y,k}
    removes the label-shift signal from the E-step, so its clusters follow the concepts (S4 Fig. 3) by
    round ~40; FedEM's stay mixed with the label groups (ARI ≈ 0.5 here)."""
    fedrc, fedem = _ari_after("fedrc", 0, 50, tmp_path), _ari_after("fedem", 0, 50, tmp_path)
    assert fedrc > 0.9 and fedrc > fedem + 0.25


@pytest.mark.slow
def test_fedrc_beats_fedem_on_concepts_over_seeds(tmp_path: Path) -> None:
    """The same over three seeds and 150 rounds (measured: FedRC 1.0/1.0/1.0, FedEM 0.67/0.48/0.67)."""
    pairs = [(_ari_after("fedrc", s, 150, tmp_path), _ari_after("fedem", s, 150, tmp_path)) for s in range(3)]
    assert all(rc >= em for rc, em in pairs)
    assert np.mean([rc for rc, _ in pairs]) > np.mean([em for _, em in pairs]) + 0.25


def test_fedsoft_shares_and_centres(tmp_path: Path) -> None:
    """FedSoft: u_{i;k} = share of client i's samples that centre k fits best (floored at σ, on the simplex),
    computed with the centres received; c_k = Σ_i u_{i;k} N_i w_i / Σ_i u_{i;k} N_i of the personal models."""
    run = _run(["algorithm=fedsoft", "algorithm.floor=0.05", "rounds=2", "lr=0.3", "device=cpu", f"out={tmp_path}"])
    alg, clients = run.alg, run.stream[0]
    rows, owner = alg.rows(clients)
    losses = alg.losses(rows)
    share = np.stack([np.bincount(owner[losses.argmin(1) == k], minlength=len(clients)) for k in range(3)], 1)
    share = share / share.sum(1, keepdims=True)
    u = fedsoft(-losses, owner, len(clients), 0.05)
    assert (u >= 0.05 / (1 + 3 * 0.05) - 1e-9).all() and np.allclose(u.sum(1), 1)
    np.testing.assert_allclose(u, np.maximum(share, 0.05) / np.maximum(share, 0.05).sum(1, keepdims=True))
    alg.run_round(0, clients)
    np.testing.assert_allclose(alg.omega[clients], u)
    w = torch.as_tensor(u * run.fed.train.sizes[clients][:, None], dtype=torch.float32)
    for name, centre in alg.models.items():
        personal = alg.personal[name][torch.as_tensor(clients)]
        expected = torch.einsum("mk,m...->k...", w / w.sum(0), personal)
        torch.testing.assert_close(centre, expected, rtol=1e-4, atol=1e-5)


def test_oneshot_clusters_local_models_once_then_averages_within_clusters(tmp_path: Path) -> None:
    """One-shot (Ghosh et al. 2019): round 1 fits local models from θ^0, k-means on them fixes the clusters, each
    centre is its members' N_i-weighted mean; later rounds keep the assignment."""
    run = _run(["algorithm=oneshot", "algorithm.local_epochs=2", "rounds=3", "lr=0.3", "device=cpu", f"out={tmp_path}"])
    alg, clients = run.alg, run.stream[0]
    theta0 = {n: v[:1].expand(len(clients), *v.shape[1:]).clone() for n, v in alg.models.items()}
    local = alg.ctx.trainer.train(theta0, clients, replace_solver(alg.ctx.solver, epochs=2), 0)
    expected = kmeans_models(flatten(local), 3, run.cfg.seed)
    alg.run_round(0, clients)
    np.testing.assert_array_equal(alg.assigned[clients], expected)
    sizes = torch.as_tensor(run.fed.train.sizes[clients], dtype=torch.float32)
    for k in range(3):
        m = torch.as_tensor(expected == k)
        w = sizes[m] / sizes[m].sum()
        for name, v in alg.models.items():
            torch.testing.assert_close(v[k], torch.einsum("m,m...->...", w, local[name][m]), rtol=1e-4, atol=1e-5)
    first = alg.assigned.copy()
    alg.run_round(1, run.stream[1])
    np.testing.assert_array_equal(alg.assigned, first)


def test_ifca_zero_fill_is_s4s_code_as_run(tmp_path: Path) -> None:
    """zero_fill: a model no client picked becomes all zeros (S4's code averages an empty list); default: kept."""
    runs = {}
    for fill in (False, True):
        run = _run(["algorithm=ifca", "algorithm.num_clusters=3", f"algorithm.zero_fill={str(fill).lower()}",
                    "rounds=1", "lr=0.3", f"out={tmp_path / str(fill)}"])
        # model 2 predicts class 0 with certainty: the worst model for every client, so nobody picks it
        run.alg.models = {n: v.clone() for n, v in run.alg.models.items()}
        run.alg.models["head.bias"][2, 0] = 100.0
        before = {n: v[2].clone() for n, v in run.alg.models.items()}
        run.alg.run_round(0, run.stream[0])
        assert 2 not in run.alg.omega.argmax(1)[run.stream[0]]
        runs[fill] = (before, {n: v[2] for n, v in run.alg.models.items()}, run)
    before, after, _ = runs[False]
    for n in before:
        torch.testing.assert_close(after[n], before[n])  # the paper's IFCA: an unpicked model is unchanged
    _, after, run = runs[True]
    assert all(float(v.abs().max()) == 0.0 for v in after.values())
    picked = {n: v[:2] for n, v in run.alg.models.items()}
    assert any(float(v.abs().max()) > 0 for v in picked.values())


def test_hcfl_head_update_prototypes_follow_the_head_change(tmp_path: Path) -> None:
    """prototypes=head-update (S1's public code): eq. 9's rows are each client's head update per class; clients
    whose head moved the same way are at distance 0, opposite ones at 2 (CSCP: max over the class rows)."""
    run = _run(["algorithm=hcfl-plus", "algorithm.prototypes=head-update", "algorithm.principle=cscp",
                "rounds=1", f"out={tmp_path / 'h'}"])
    alg = run.alg
    k = alg.num_clusters
    local = {n: v.unsqueeze(0).repeat(3, *[1] * v.dim()).clone() for n, v in alg.models.items()}  # [m=3, K, ...]
    bump = torch.zeros_like(alg.models["head.weight"][0])
    bump[:, 0] = 1.0
    local["head.weight"][0, 0] += bump
    local["head.weight"][1, 0] += 2 * bump
    local["head.weight"][2, 0] -= bump
    view = RoundView(alg, alg.cohort(np.arange(3)), local, np.zeros(3, dtype=np.int64), np.full(3, -1))
    d = alg.adaptation.distance.matrix(view)
    assert k >= 1 and d.shape == (3, 3)
    np.testing.assert_allclose(d[0, 1], 0.0, atol=1e-9)
    np.testing.assert_allclose(d[0, 2], 2.0, atol=1e-9)


def test_hcfl_updates_pair_parameters_by_name(tmp_path: Path) -> None:
    """A client whose models equal θ^t has a zero update, whatever order the trainer returns the parameters in
    (the K-head trainer of a shared extractor returns head.bias before head.weight)."""
    run = _run(["algorithm=hcfl-plus", "rounds=1", f"out={tmp_path / 'u'}"])
    alg = run.alg
    reordered = dict(reversed(list(alg.models.items())))
    local = {n: v.unsqueeze(0).repeat(3, *[1] * v.dim()).clone() for n, v in reordered.items()}  # [m=3, K, ...]
    view = RoundView(alg, alg.cohort(np.arange(3)), local, np.zeros(3, dtype=np.int64), np.full(3, -1))
    update = view.updates()
    assert update.shape[0] == 3
    assert float(update.abs().max()) == 0.0
