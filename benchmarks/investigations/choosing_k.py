"""Choosing K: every clustered method side by side on one rotated Fashion-MNIST federation, and a K sweep of the
fixed-K methods (the measurements and pictures of docs/guide/choosing-k.md).

Federation: Fashion-MNIST, 4 rotations (0°, 90°, 180°, 270°; each angle its own true cluster), 20 clients (5 per
angle, iid labels), 8,000 training images in all (≈ 280 train / 120 validation per client), one test client per
angle (``--test-size`` 1,000 images each); MLP with one hidden layer of 64, SGD lr 0.1, batch 32, one local epoch,
full participation, ``--rounds`` 30 rounds, evaluation every 2. Seeds 0, 1, 2 (each seed its own federation).

Two parts, each row stored as soon as its run ends (``<out>/rows.jsonl``; a rerun with the same ``--out`` skips the
rows already there, so an interrupted run loses nothing):

* ``table``: every clustered method at its usual settings, fixed-K methods at the true K = 4;
* ``sweep``: IFCA, FedRC and FedGroup for K ∈ {1, 2, 3, 4, 6}.

Then ``--plot`` draws ``sweep-ari.png``, ``sweep-val.png`` (ARI and best validation accuracy against K) and
``kt.png`` (K^t over the rounds of the adaptive methods, seed 0) into ``--figures`` and prints the table.

``--only KEY[,KEY]`` runs the chosen rows only (the keys of ``TABLE``, or ``ifca-k4``-style sweep keys), e.g. to
check one row of the page's table without its other 101 runs.

Usage: python benchmarks/investigations/choosing_k.py [--parts table,sweep] [--only KEYS] [--seeds 0,1,2]
       [--out runs/choosing-k] [--plot]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _common, _synthetic

import _common as common  # first: pins BLAS threads before numpy/torch load

import fedcluster

FEDERATION: dict[str, Any] = {
    "dataset": "fashion-mnist",
    "scenario": {"name": "rotation", "angles": [0, 90, 180, 270], "group_by": "angle", "samples": 8000},
    "model": {"name": "mlp", "hidden": [64]},
    "num_clients": 20, "clients_per_round": 1.0, "rounds": 30, "local_epochs": 1, "batch_size": 32, "lr": 0.1,
    "eval_every": 2, "threads": 1,
}
K = 4  # the true number of clusters
# key: (row label, algorithm section); fixed-K methods at K = 4, adaptive ones at their usual settings
TABLE: dict[str, tuple[str, dict[str, Any]]] = {
    "fedavg": ("FedAvg (one model)", {"name": "fedavg"}),
    "oracle": ("oracle (true clusters)", {"name": "oracle", "num_clusters": K}),
    "ifca": ("IFCA", {"name": "ifca", "num_clusters": K}),
    "fesem": ("FeSEM", {"name": "fesem", "num_clusters": K}),
    "fedem": ("FedEM", {"name": "fedem", "num_clusters": K}),
    "fedrc": ("FedRC", {"name": "fedrc", "num_clusters": K}),
    "fedsoft": ("FedSoft", {"name": "fedsoft", "num_clusters": K}),
    "oneshot": ("one-shot k-means", {"name": "oneshot", "num_clusters": K}),
    "fedgroup": ("FedGroup", {"name": "fedgroup", "num_groups": K}),
    "cflgp": ("CFL-GP", {"name": "cflgp", "num_clusters": K}),
    "cfl": ("CFL", {"name": "cfl", "warmup": 10}),
    "icfl": ("ICFL", {"name": "icfl", "alpha0": 0.98}),
    "stocfl": ("StoCFL", {"name": "stocfl", "tau": 0.3}),
    "pacfl": ("PACFL", {"name": "pacfl", "nu": 20}),
    "fedrc-adaptive": ("adaptive FedRC", {"name": "fedrc-adaptive"}),
    "hcfl-plus": ("HCFL+ (FedRC)", {"name": "hcfl-plus", "backbone": "fedrc", "rho": 0.3}),
    # ward heights on this federation after 5 FedAvg rounds: within an angle ≤ 0.78, across ≥ 1.96
    "flhc": ("FL+HC", {"name": "flhc", "cluster_round": 5, "distance_threshold": 1.5}),
    "flhc-gap": ("FL+HC (threshold from the gap)", {"name": "flhc", "cluster_round": 5}),
    "fedgrouprox": ("FedGrouProx", {"name": "fedgrouprox", "num_groups": K}),
    "fedgwc": ("FedGWC", {"name": "fedgwc"}),
    "wecfl": ("WeCFL", {"name": "wecfl", "num_clusters": K}),
    "lcfed": ("LCFed", {"name": "lcfed", "num_clusters": K}),
    "cgpfl": ("CGPFL", {"name": "cgpfl", "num_clusters": K}),
    "clove": ("CLoVE (K̂ = 6)", {"name": "clove", "num_clusters": 6, "route": "ward"}),
    "clove-finch": ("CLoVE, FINCH (K̂ = 6)", {"name": "clove", "num_clusters": 6, "route": "finch"}),
}
SWEEP = {"ifca": ("IFCA", "num_clusters"), "fedrc": ("FedRC", "num_clusters"), "fedgroup": ("FedGroup", "num_groups")}
SWEEP_K = [1, 2, 3, 4, 6]
ADAPTIVE = ["cfl", "icfl", "stocfl", "pacfl", "fedrc-adaptive", "hcfl-plus", "flhc", "flhc-gap", "fedgwc", "clove",
            "clove-finch"]


def runs(parts: list[str], only: list[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(part, key, algorithm section) of every run (``only``: the rows with these keys)."""
    out = [("table", key, alg) for key, (_, alg) in TABLE.items()] if "table" in parts else []
    if "sweep" in parts:
        out += [("sweep", f"{name}-k{k}", {"name": name, knob: k}) for name, (_, knob) in SWEEP.items()
                for k in SWEEP_K]
    return out if only is None else [r for r in out if r[1] in only]


def found_clusters(rows: list[dict[str, Any]]) -> float:
    """K^T: the clusters in use at the end (CLoVE reports them apart from its K̂ models)."""
    last = rows[-1]
    found = last.get("clusters_found")
    return float(found) if found is not None and not math.isnan(float(found)) else float(last["num_clusters"])


def measure(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = out / "rows.jsonl"
    done = {(r["part"], r["key"], r["seed"]) for r in _load(store)}
    for seed in [int(s) for s in args.seeds.split(",")]:
        cfg = {**FEDERATION, "rounds": args.rounds, "seed": seed}
        fed = None
        for part, key, alg in runs(args.parts.split(","), args.only.split(",") if args.only else None):
            if (part, key, seed) in done:
                continue
            if fed is None:
                fed = common.shrink(fedcluster.build_federation(common.without_algorithm(cfg)), 1.0, args.test_size,
                                    seed)
            res, seconds = common.run({**cfg, "algorithm": alg, "checkpoint_every": args.rounds},
                                      out / part / f"{key}-s{seed}", fed)
            rows = res.rows
            row = {"part": part, "key": key, "seed": seed, "algorithm": alg,
                   "val": res.summary["best"]["val_acc"]["value"], "test": res.summary["final"]["test_acc"],
                   "ari": res.summary["final"]["ari"], "k": found_clusters(rows),
                   "seconds_per_round": seconds / args.rounds,
                   "kt": [found_clusters([r]) for r in rows]}
            with store.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{part} {key} seed {seed}: val {row['val']:.3f} test {row['test']:.3f} ARI {row['ari']:.3f} "
                  f"K^T {row['k']:.0f} ({row['seconds_per_round']:.2f} s/round)", flush=True)


def _load(store: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in store.read_text().splitlines()] if store.is_file() else []


def _stat(values: list[float]) -> tuple[float, float]:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return float("nan"), float("nan")
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else float("nan"))


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown comparison table: mean ± sd over the seeds."""
    lines = ["| method | settings | test acc. | best val. acc. | ARI | K^T | s / round |",
             "|---|---|---|---|---|---|---|"]
    for key, (label, alg) in TABLE.items():
        mine = [r for r in rows if r["part"] == "table" and r["key"] == key]
        if not mine:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in alg.items() if k != "name") or "-"
        cells = [common.pm(*_stat([100 * r["test"] for r in mine]), ".1f"),
                 common.pm(*_stat([100 * r["val"] for r in mine]), ".1f"),
                 common.pm(*_stat([r["ari"] for r in mine]), ".2f"),
                 common.pm(*_stat([r["k"] for r in mine]), ".1f"),
                 common.pm(*_stat([r["seconds_per_round"] for r in mine]), ".2f")]
        lines.append(f"| {label} (`{alg['name']}`) | {settings} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], figures: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures.mkdir(parents=True, exist_ok=True)
    for metric, label, name in (("ari", "ARI with the true clusters", "sweep-ari.png"),
                                ("val", "best local validation accuracy", "sweep-val.png")):
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for method, (title, _) in SWEEP.items():
            ks, means, sds = [], [], []
            for k in SWEEP_K:
                mine = [r[metric] for r in rows if r["part"] == "sweep" and r["key"] == f"{method}-k{k}"]
                if mine:
                    mean, sd = _stat(mine)
                    ks.append(k), means.append(mean), sds.append(0.0 if math.isnan(sd) else sd)
            if ks:
                ax.errorbar(ks, means, yerr=sds, marker="o", capsize=3, label=title)
        ax.axvline(K, color="grey", linestyle=":", label="true K")
        ax.set_xlabel("K (number of cluster models)")
        ax.set_ylabel(label)
        ax.legend()
        fig.tight_layout()
        fig.savefig(figures / name, dpi=110)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for key in ADAPTIVE:
        mine = [r for r in rows if r["part"] == "table" and r["key"] == key and r["seed"] == 0]
        if mine:
            kt = mine[0]["kt"]
            ax.plot(range(1, len(kt) + 1), kt, marker=".", label=TABLE[key][0])
    ax.axhline(K, color="grey", linestyle=":", label="true K")
    ax.set_xlabel("round")
    ax.set_ylabel("$K^t$ (clusters in use)")
    ax.set_yscale("log", base=2)
    ticks = [1, 2, 4, 8, 16, 32]
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(figures / "kt.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="table,sweep")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--only", default="", help="comma-separated row keys: run these rows only")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--test-size", type=int, default=1000, help="images per test client (one per angle)")
    ap.add_argument("--out", default="runs/choosing-k")
    ap.add_argument("--plot", action="store_true", help="draw the figures and print the table from --out")
    ap.add_argument("--figures", default="docs/figures/choosing-k")
    args = ap.parse_args()
    if not args.plot:
        measure(args)
    rows = _load(Path(args.out) / "rows.jsonl")
    if args.plot or not args.only:  # a few chosen rows would redraw the page's figures without the rest
        plot(rows, Path(args.figures))
    print(table(rows))


if __name__ == "__main__":
    main()
