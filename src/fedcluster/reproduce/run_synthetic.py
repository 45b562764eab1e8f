"""Runners of the synthetic regressions: the FedMD paper's mixed linear regression (A/B/C) and the CFL-GP paper's three
lines."""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from fedcluster.data.federation import Federation
from fedcluster.data.sources.synthetic import cflgp_lines, mixed_regression, mixed_regression_config
from fedcluster.engine.runner import Run
from fedcluster.errors import DivergedError
from fedcluster.metrics.regression import param_error, regression_extras
from fedcluster.reproduce.run_common import Emit, diverged, first_round, make_run
from fedcluster.reproduce.spec import Budget, Experiment

# method -> FedMD's init (the baselines share FedMD's Phase 2); FedAvg is the registered fedavg
MIXREG_INIT = {"two-phase": "fedmd", "one-shot": "oneshot", "ifca-random": "random", "oracle": "oracle"}


def mixreg_curve(fed: Federation, method: str, rounds: int, common: Sequence[str], out: Path,
                 over: Sequence[str] = ()) -> np.ndarray:
    """Estimation error d(θ̂, θ*) per round (the FedMD paper's measure); FedAvg's single model stands for every
    cluster. ``over``: the method's own overrides (e.g. Phase 2's local steps s), applied last."""
    base = [*common, "scenario=mixed-regression", "dataset=mixed-regression", "model=linear-nobias",
            f"rounds={rounds}", f"num_clients={fed.num_clients}", f"clients_per_round={fed.num_clients}"]
    if method != "fedavg":
        run = make_run([*base, "algorithm=fedmd", f"algorithm.init={MIXREG_INIT.get(method, 'fedmd')}",
                        "algorithm.num_clusters=3", "algorithm.local_steps=5", *over], out, fed)
        run.execute()
        return np.array([r["param_error"] for r in run.dir.read_rounds()])
    run = make_run([*base, "algorithm=fedavg", "local_epochs=5", f"batch_size={int(fed.train.sizes.max())}"], out, fed)
    ts = fed.extras["theta_star"]
    errs = []
    try:
        for t in range(rounds):
            run.alg.run_round(t, run.stream[t])
            w = run.alg.models["head.weight"].detach().double().reshape(1, -1).cpu().numpy()
            errs.append(param_error(np.repeat(w, len(ts), 0), ts))
            if not np.isfinite(errs[-1]):
                raise DivergedError(f"training diverged at round {t + 1}: FedAvg's model is not finite")
    finally:
        run.ctx.trainer.close()
    return np.array(errs)


def _option(overrides: Sequence[str], key: str) -> str | None:
    return next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith(f"{key}=")), None)


def run_mixreg(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
               emit: Emit) -> None:
    """Every method of one seed, per setting (the ratio to the oracle needs the whole seed's setting, so each setting
    is all or nothing). A setting's ``scenario.config=`` picks the configuration (else the experiment's); a method
    override ``algorithm.prox_mu=1/LR`` becomes 1/lr, the FedMD paper's proximal weight 1/η in the engine's scale."""
    for setting in exp.settings:
        if all((setting.name, m.label) in done for m in exp.methods):
            continue
        config = _option(setting.overrides, "scenario.config") or _option(exp.overrides, "scenario.config")
        fed = mixed_regression(**mixed_regression_config(str(config)), seed=seed)
        common = [*budget.overrides, *(o for o in setting.overrides if not o.startswith("scenario.config=")),
                  f"seed={seed}", *extra]
        lr = float(_option(common, "lr") or 0.01)
        curves, seconds, failed = {}, {}, {}
        with tempfile.TemporaryDirectory() as tmp:
            for i, m in enumerate(exp.methods):
                t0 = time.perf_counter()
                over = [o.replace("=1/LR", f"={1 / lr:g}") for o in m.overrides]
                try:
                    curves[m.label] = mixreg_curve(fed, m.label, budget.rounds, common, Path(tmp) / f"m{i}", over)
                except DivergedError as e:  # a result, not a crash: its metrics are NaN, the page lists it
                    curves[m.label] = np.full(budget.rounds, math.nan)
                    failed[m.label] = str(e).split(";")[0]
                seconds[m.label] = time.perf_counter() - t0
        oracle = curves["oracle"][-1]
        for label, c in curves.items():
            hit, hit2 = np.flatnonzero(c <= 1.1 * oracle), np.flatnonzero(c <= 2 * oracle)
            emit({"seed": seed, "setting": setting.name, "method": label, "seconds": seconds[label],
                  **({"diverged": failed[label]} if label in failed else {}),
                  "metrics": {"err5": float(c[min(4, len(c) - 1)]), "err105": float(c[min(104, len(c) - 1)]),
                              "final": float(c[-1]), "ratio": float(c[-1] / oracle),
                              "hit": float(hit[0] + 1) if len(hit) else math.nan,
                              "hit2": float(hit2[0] + 1) if len(hit2) else math.nan},
                  "curve": [[t + 1, float(v)] for t, v in enumerate(c) if not math.isnan(v)]})


def run_lines(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set[tuple[str, str]],
              emit: Emit) -> None:
    """CFL-GP paper Fig. 1: every method with the same K starting lines θ_1 ~ U(−a, a), θ_2 = 0 (CFL: the first one)."""
    for setting in exp.settings:
        if all((setting.name, m.label) in done for m in exp.methods):
            continue
        p = setting.params
        C, b, init = int(p["C"]), int(p["b"]), float(p["init"])
        assign = np.random.default_rng(seed).permutation(np.arange(C) % 3).tolist()
        pool = max(2000, budget.rounds * b)
        fed = cflgp_lines(C, float(p["dphi"]), b, pool_size=pool, assignment=assign, seed=seed)

        def init_models(run: Run, init: float = init) -> None:
            k = run.alg.models["head.weight"].shape[0]
            g = torch.Generator().manual_seed(seed)
            start = ((torch.rand(3, 1, 1, generator=g) * 2 - 1) * init)[:k]  # the same lines on every device
            run.alg.models["head.weight"] = start.to(run.device)
            run.alg.models["head.bias"] = torch.zeros(k, 1, device=run.device)

        for m in exp.methods:
            if (setting.name, m.label) in done:
                continue
            batch = pool if m.label.startswith("cfl ") else b  # MADMO: one full-batch gradient step per round
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                run = make_run(["scenario=cflgp-lines", "dataset=cflgp-lines", "model=linear", "lr=0.1",
                                f"rounds={budget.rounds}", f"num_clients={C}", f"clients_per_round={C}", f"seed={seed}",
                                f"batch_size={batch}", *m.overrides, *extra], Path(tmp) / "run", fed)
                init_models(run)
                try:
                    run.execute()
                except DivergedError as e:  # a result, not a crash: recorded, the page lists it
                    emit(diverged(seed, setting.name, m.label, exp, e, time.perf_counter() - t0))
                    continue
                rows = run.dir.read_rounds()
            alg = run.alg
            mse = regression_extras(alg.ctx.fed, alg.models, alg.assignment, alg.predict,
                                    alg.ctx.trainer.per_client).get("mse", math.nan)
            emit({"seed": seed, "setting": setting.name, "method": m.label, "seconds": time.perf_counter() - t0,
                  "metrics": {"ari": rows[-1]["ari"], "mse": mse, "to_ari1": first_round(rows, "ari", 1.0)},
                  "curve": [[r["round"], r["ari"]] for r in rows]})
