"""What ICFL, StoCFL and PACFL see on small federations: the statistics behind
``tests/algorithms/test_cfl_baselines_behaviour.py`` and the PACFL rotated-digits investigation of docs/fidelity.md.

- PACFL: the proximity matrix (degrees) within and across the true groups, and the ν window that gives ARI 1
  (the reference hierarchical clustering, average linkage), for rotations 0/180 and 0/90/180/270, iid, two
  disjoint label sets ({0–4} | {5–9}) and two label-map concepts; for the implemented signature (per class,
  ``n_basis`` = 3, entry-min angle, raw inputs) and variants (p = 1, the smallest principal angle, one
  signature of the whole client, the standardised inputs the models see).
- ICFL (α*(0) = 0.85, ε1 = 4): per round K, the ARI, the smallest connectivity α_G tested and the threshold α_t.
- StoCFL: the cosine of the clients' first updates within and across concepts, and K / ARI after 3 rounds for
  τ ∈ {0.1, 0.3, 0.5}.

Usage: python benchmarks/investigations/cfl_baselines_probe.py [--parts pacfl,icfl,stocfl] [--seeds 0 1 2 3 4]
       [--dataset digits] [--samples N] [--clients 8] [--rounds 25]
(``--dataset fashion-mnist --samples 4000``: PACFL on 28×28 images, about a minute per federation on 2 cores.)
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # 2 shared cores: no BLAS threads
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

from fedcluster.catalog.registry import DATASETS  # noqa: E402
from fedcluster.config.run_config import load_raw, resolve  # noqa: E402
from fedcluster.data.assemble import ClientPlan, assemble  # noqa: E402
from fedcluster.data.build import build_federation  # noqa: E402
from fedcluster.data.federation import Federation  # noqa: E402
from fedcluster.data.scenarios.common import full_test  # noqa: E402
from fedcluster.engine.runner import Run  # noqa: E402
from fedcluster.tiers.distance import cosine_similarity, data_signature, subspace_angles  # noqa: E402
from fedcluster.tiers.regrouping import threshold_clusters  # noqa: E402

NUS = np.round(np.arange(0.25, 60.01, 0.25), 2)
TWO_CONCEPTS = ["scenario=concept-swap", "scenario.concepts=2", "scenario.alpha=10"]
IID = ["scenario=iid"]


def federation(args: argparse.Namespace, overrides: list[str], seed: int, normalize: bool = False) -> Federation:
    cfg, typed = resolve(load_raw(None, [f"dataset={args.dataset}", f"num_clients={args.clients}", f"seed={seed}",
                                         f"normalize={str(normalize).lower()}", "progress=false", *overrides]))
    return build_federation(cfg, typed["scenario"])


def label_groups(args: argparse.Namespace, seed: int) -> Federation:
    """Half the clients hold classes 0–4 only, the other half classes 5–9 only."""
    data, rng = DATASETS.get(args.dataset).obj.load(None), np.random.default_rng(seed)
    plans = []
    for g, classes in enumerate(((0, 1, 2, 3, 4), (5, 6, 7, 8, 9))):
        rows = rng.permutation(np.flatnonzero(np.isin(data.y_train, classes)))
        if args.samples:
            rows = rows[: args.samples // 2]
        plans += [ClientPlan(np.sort(p), concept=g) for p in np.array_split(rows, args.clients // 2)]
    return assemble(data, plans, [full_test(data)], 0.2, rng, {"name": "label-groups"})


def signatures(fed: Federation, n_basis: int, per_class: bool) -> list[np.ndarray]:
    """Every client's signature on its inputs as ``fed`` holds them (standardised ones if it was standardised)."""
    out = []
    for i in range(fed.num_clients):
        x, y = fed.train.client(i)
        out.append(data_signature(x, y if per_class else y * 0, n_basis))
    return out


def describe(a: np.ndarray, truth: np.ndarray) -> str:
    same = np.equal.outer(truth, truth) & ~np.eye(len(truth), dtype=bool)
    cross = ~np.equal.outer(truth, truth)
    text = f"within {a[same].min():6.2f}..{a[same].max():6.2f}"
    if not cross.any():
        whole = [nu for nu in NUS if threshold_clusters(a, nu).max() == 0]
        return text + f"   one cluster from ν = {min(whole) if whole else '-'}"
    ok = [nu for nu in NUS if adjusted_rand_score(truth, threshold_clusters(a, nu)) == 1.0]
    window = f"[{min(ok)}, {max(ok)}]" if ok else "none"
    labels = {nu: threshold_clusters(a, nu) for nu in (4.9, 10.0, 20.0)}
    at = " ".join(f"ν={nu}: K={v.max() + 1} ARI={adjusted_rand_score(truth, v):.2f}" for nu, v in labels.items())
    return text + f"   across {a[cross].min():6.2f}..{a[cross].max():6.2f}   ARI-1 ν window {window}   ({at})"


def pacfl(args: argparse.Namespace) -> None:
    samples = [f"scenario.samples={args.samples}"] if args.samples else []
    cases = {
        "rotations 0/180": ["scenario=rotation", "scenario.angles=[0,180]", *samples],
        "rotations 0/90/180/270": ["scenario=rotation", "scenario.angles=[0,90,180,270]", *samples],
        "iid": IID,
        "label sets {0-4}|{5-9}": None,
        "label maps y, y+5": TWO_CONCEPTS,
    }
    variants = [("per class p=3 entry-min [implemented]", 3, True, "entry-min", True),
                ("per class p=1 entry-min", 1, True, "entry-min", True),
                ("per class p=3 principal", 3, True, "principal", True),
                ("whole client p=3 entry-min", 3, False, "entry-min", True),
                ("whole client p=3 principal", 3, False, "principal", True),
                ("per class p=3 entry-min, standardised x", 3, True, "entry-min", False)]
    for name, overrides in cases.items():
        print(f"\nPACFL — {args.dataset}, {args.clients} clients: {name}")
        for seed in args.seeds:
            fed = label_groups(args, seed) if overrides is None else federation(args, overrides, seed)
            std = None if overrides is None else federation(args, overrides, seed, normalize=True)
            sizes = fed.train.sizes
            print(f"  seed {seed} (training samples per client {sizes.min()}–{sizes.max()})")
            for label, p, per_class, measure, raw in variants:
                if not raw and std is None:
                    continue
                sig = signatures(fed if raw else std, p, per_class)
                print(f"    {label:42s} {describe(subspace_angles(sig, measure), fed.true_cluster)}")


def play(args: argparse.Namespace, overrides: list[str], seed: int, rounds: int) -> tuple[Run, list[dict]]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg, typed = resolve(load_raw(None, [f"dataset={args.dataset}", f"num_clients={args.clients}", f"seed={seed}",
                                             f"rounds={rounds}", "progress=false", "threads=1", "checkpoint_every=1000",
                                             f"out={Path(tmp) / 'run'}", *overrides]))
        run = Run(cfg, typed)
        try:
            extras = [run.play_round(t).extra | {"K": run.alg.num_clusters, "ARI": adjusted_rand_score(
                run.fed.true_cluster, run.alg.cluster)} for t in range(rounds)]
        finally:
            run.dir.release()
    return run, extras


def icfl(args: argparse.Namespace) -> None:
    for name, overrides in (("two label-map concepts", TWO_CONCEPTS), ("iid", IID)):
        print(f"\nICFL α*(0)=0.85 ε1=4 — {args.dataset}, {args.clients} clients: {name}")
        for seed in args.seeds:
            _, rows = play(args, ["algorithm=icfl", "algorithm.alpha0=0.85", *overrides], seed, args.rounds)
            print(f"  seed {seed}  K     {[r['K'] for r in rows]}")
            print(f"          ARI   {[round(r['ARI'], 2) for r in rows]}")
            print(f"          α_G   {[round(r['min_connectivity'], 2) for r in rows]}")
            print(f"          α_t   {[round(r['icfl_threshold'], 2) for r in rows]}")


def stocfl(args: argparse.Namespace) -> None:
    for name, overrides in (("two label-map concepts", TWO_CONCEPTS), ("iid", IID)):
        print(f"\nStoCFL — {args.dataset}, {args.clients} clients: {name}")
        for seed in args.seeds:
            run, _ = play(args, ["algorithm=stocfl", "algorithm.tau=1", *overrides], seed, 1)  # τ = 1: no merges
            reps = run.alg.rep_sum.numpy() / run.alg.rep_count[:, None]
            cos, truth = cosine_similarity(reps), run.fed.true_cluster
            same = np.equal.outer(truth, truth) & ~np.eye(len(truth), dtype=bool)
            cross = ~np.equal.outer(truth, truth)
            text = f"  seed {seed}  first-update cosine within {cos[same].min():.2f}..{cos[same].max():.2f}"
            if cross.any():
                text += f" across {cos[cross].min():.2f}..{cos[cross].max():.2f}"
            for tau in (0.1, 0.3, 0.5):
                _, rows = play(args, ["algorithm=stocfl", f"algorithm.tau={tau}", *overrides], seed, 3)
                text += f" | τ={tau}: K={[r['K'] for r in rows]} ARI={rows[-1]['ARI']:.2f}"
            print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="pacfl,icfl,stocfl")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--samples", type=int, default=None, help="training pool subset for rotations/label sets")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=25, help="ICFL rounds")
    args = parser.parse_args()
    parts = {"pacfl": pacfl, "icfl": icfl, "stocfl": stocfl}
    for part in args.parts.split(","):
        parts[part](args)


if __name__ == "__main__":
    main()
