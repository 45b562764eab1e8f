"""Equivalence snapshot: every registered method (and the variants the tests exercise) on tiny federations, on
the vectorised, dense and sequential engines and on 2 ranks; the run files are stored without their time columns
so that a refactoring can be checked to change no number.

    python benchmarks/fidelity/equivalence_snapshot.py snapshot OUT [--only SUBSTRING] [--no-ranks]
        [--engines vectorized,dense,sequential|none]
    python benchmarks/fidelity/equivalence_snapshot.py compare BASELINE NEW [--tol 1e-6]

``snapshot`` writes ``OUT/<engine>/<case>/{rounds.csv,clients.csv,summary.json,clusters.jsonl}`` (``seconds``,
``wall_seconds``, ``git_revision`` and ``run_dir`` dropped). ``compare`` reports, per engine, the cases that are
identical, those equal within ``--tol`` (relative, for numbers that a shared computation may now sum in another
order) and those that differ, and exits 1 if any differ (or are missing).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fedcluster.catalog.registry import ALGORITHMS

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ENGINES = ("vectorized", "dense", "sequential")
TINY = ["num_clients=6", "rounds=4", "progress=false", "threads=1", "checkpoint_every=2"]
REGRESSION = ["dataset=mixed-regression", "scenario=mixed-regression", "model=linear-nobias"]
LINES = ["dataset=cflgp-lines", "scenario=cflgp-lines", "model=linear"]

# label -> the run's key=value arguments besides TINY (the defaults of every registered method, then variants)
METHODS = ALGORITHMS.names()
OWN = {"fedmd": ["algorithm.delta=1.0", "algorithm.init=random"]}
CASES: dict[str, list[str]] = {m: [f"algorithm={m}", *OWN.get(m, [])] for m in METHODS}
HCFL = ["algorithm=hcfl", "algorithm.rho=0", "algorithm.num_clusters=2"]
CASES.update({
    # server step size η < 1 (the shared server update θ ← θ + η(mean − θ)), momentum, partial participation
    "fedavg-global-lr": ["algorithm=fedavg", "global_lr=0.5", "momentum=0.9", "weight_decay=0.001"],
    "ifca-global-lr": ["algorithm=ifca", "algorithm.num_clusters=3", "global_lr=0.5"],
    "fedrc-global-lr": ["algorithm=fedrc", "global_lr=0.7", "clients_per_round=3"],
    "hcfl-global-lr": [*HCFL, "global_lr=0.5"],
    "stocfl-global-lr": ["algorithm=stocfl", "algorithm.tau=0.1", "global_lr=0.5"],
    "cfl-split": ["algorithm=cfl", "algorithm.warmup=0", "algorithm.min_size=2", "algorithm.tol1=10",
                  "algorithm.tol2=0", "global_lr=0.5"],
    "icfl-split": ["algorithm=icfl", "algorithm.alpha0=0.98", "algorithm.eps1=100"],
    "stocfl-merge": ["algorithm=stocfl", "algorithm.tau=-1"],
    "fesem-partial": ["algorithm=fesem", "clients_per_round=2"],
    "fedem-partial": ["algorithm=fedem", "clients_per_round=2"],
    "fedem-split": ["algorithm=fedem", "algorithm.split=true"],
    "fedem-joint": ["algorithm=fedem", "algorithm.formulation=joint"],
    "fedem-sample": ["algorithm=fedem", "algorithm.weights_scope=sample", "algorithm.mu_tilde=0.4"],
    "fedrc-ft": ["algorithm=fedrc", "algorithm.ft=true"],
    "fedrc-hard-train": ["algorithm=fedrc", "algorithm.hard=train"],
    "fedrc-hard-test": ["algorithm=fedrc", "algorithm.hard=test"],
    "fedrc-adam": ["algorithm=fedrc", "algorithm.adam=true"],
    "fedrc-momentum-keep": ["algorithm=fedrc", "momentum=0.9", "client_momentum=keep"],
    "fedrc-eval-train": ["algorithm=fedrc", "eval_train=true"],
    "fedrc-adaptive-k": ["algorithm=fedrc-adaptive", "algorithm.num_clusters=4", "algorithm.delta=0.3"],
    "ifca-gradient": ["algorithm=ifca", "algorithm.variant=gradient"],
    "fedsoft-partial": ["algorithm=fedsoft", "clients_per_round=3"],
    "cflgp-model": ["algorithm=cflgp", "algorithm.variant=model", "algorithm.period=1"],
    "cflgp-random": ["algorithm=cflgp", "algorithm.compression=random", "algorithm.compression_ratio=2",
                     "algorithm.stable_stop=false"],
    "cflgp-lines": ["algorithm=cflgp", *LINES, "algorithm.num_clusters=3", "algorithm.period=1"],
    "fedmd-regression": ["algorithm=fedmd", *REGRESSION, "algorithm.init=oneshot"],
    "fedmd-regression-md": ["algorithm=fedmd", *REGRESSION, "algorithm.pairs=one", "algorithm.num_anchors=4"],
    "pacfl-standardised": ["algorithm=pacfl", "normalize=true", "algorithm.nu=10"],
    "hcfl-split-remove": [*HCFL],
    "hcfl-hard-loss": [*HCFL, "algorithm.weights=hard-loss"],
    "hcfl-hard-distance": [*HCFL, "algorithm.weights=hard-distance"],
    "hcfl-fedsoft": [*HCFL, "algorithm.weights=fedsoft", "algorithm.prox=0.1"],
    "hcfl-cfl": [*HCFL, "algorithm.adaptive=cfl", "algorithm.split=false", "algorithm.distance=update-cosine",
                 "algorithm.tol1=10", "algorithm.tol2=0", "algorithm.min_size=2"],
    "hcfl-cscp": [*HCFL, "algorithm.adaptive=split", "algorithm.split=false", "algorithm.distance=prototype-cscp"],
    "hcfl-head-update": [*HCFL, "algorithm.prototypes=head-update", "algorithm.reduce=mean"],
    "hcfl-l2": [*HCFL, "algorithm.distance=parameter-l2", "algorithm.scwu=false"],
    "hcfl-low-mass": [*HCFL, "algorithm.adaptive=low-mass", "algorithm.num_clusters=3", "algorithm.delta=0.3"],
    "hcfl-ratio": [*HCFL, "algorithm.formulation=fedrc-ratio", "algorithm.weights_scope=client"],
    "hcfl-plus-fedrc": ["algorithm=hcfl-plus", "algorithm.backbone=fedrc", "algorithm.rho=0"],
    "hcfl-plus-fesem": ["algorithm=hcfl-plus", "algorithm.backbone=fesem", "algorithm.rho=0"],
    "hcfl-prime-split": ["algorithm=hcfl-prime", "algorithm.warmup=0", "algorithm.min_size=2", "algorithm.tol1=10",
                         "algorithm.tol2=0"],
    "oneshot-rotation": ["algorithm=oneshot", "scenario=rotation", "scenario.angles=[0,90,180]"],
    "flhc-cluster": ["algorithm=flhc", "algorithm.cluster_round=1", "algorithm.num_clusters=2"],
    "fedgroup-inter": ["algorithm=fedgroup", "algorithm.num_groups=2", "algorithm.pretrain_scale=2",
                       "algorithm.pretrain_steps=3", "algorithm.inter_lr=0.1"],
    "fedgwc-split": ["algorithm=fedgwc", "algorithm.patience=1", "algorithm.eps=1.0", "algorithm.min_cluster_size=3",
                     "clients_per_round=3"],  # FedGWC splits under partial participation only
    "clove-sqrt": ["algorithm=clove", "algorithm.sqrt_loss=true", "algorithm.stable_rounds=1"],
})
# the 2-rank runs: every method's defaults and these variants, less what refuses ranks > 1 (a server that reads every
# input: fedmd's moment descent, the joint formulation, the personal methods' local steps; _reads_every_input)
RANK_VARIANTS = ["fedavg-global-lr", "fedrc-global-lr", "fedem-partial", "fesem-partial", "hcfl-split-remove",
                 "hcfl-cfl", "hcfl-cscp", "pacfl-standardised", "cfl-split", "stocfl-merge", "fedmd-regression",
                 "fedrc-eval-train", "icfl-split", "flhc-cluster", "fedgroup-inter", "fedgwc-split"]
DROP_COLUMNS = {"seconds"}
DROP_SUMMARY = {"wall_seconds", "git_revision", "run_dir"}
FILES = ("rounds.csv", "clients.csv", "summary.json", "clusters.jsonl")


def _args(label: str) -> list[str]:
    """The run's arguments: TINY, a 16-unit MLP unless the case names its own model, then the case's."""
    own_model = any(a.startswith("model=") for a in CASES[label])
    return [*TINY, *([] if own_model else ["model.hidden=[16]"]), *CASES[label]]


def _main_of_cli() -> Any:
    try:
        from fedcluster.app.cli import main
    except ImportError:
        from fedcluster.app.cli import main
    return main


def _store(run_dir: Path, dest: Path) -> None:
    """The run's files without their time columns."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("rounds.csv", "clients.csv"):
        if not (run_dir / name).is_file():
            continue
        with (run_dir / name).open(newline="") as f:
            rows = list(csv.DictReader(f))
        with (dest / name).open("w", newline="") as f:
            keys = [k for k in (rows[0] if rows else {}) if k not in DROP_COLUMNS]
            w = csv.DictWriter(f, keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    if (run_dir / "summary.json").is_file():
        summary = json.loads((run_dir / "summary.json").read_text())
        summary = {k: v for k, v in summary.items() if k not in DROP_SUMMARY}
        (dest / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    if (run_dir / "clusters.jsonl").is_file():
        shutil.copy(run_dir / "clusters.jsonl", dest / "clusters.jsonl")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def snapshot(out: Path, only: str | None, ranks: bool, engines: tuple[str, ...] = ENGINES) -> None:
    main = _main_of_cli()
    cases = {k: v for k, v in CASES.items() if only is None or only in k}
    scratch = Path(tempfile.mkdtemp(prefix="equiv-"))
    os.environ.setdefault("FEDCLUSTER_CACHE", str(scratch / "cache"))
    failed = []
    for engine in engines:
        for label in cases:
            run_dir = scratch / engine / label
            code = main(["run", *_args(label), f"engine={engine}", f"out={run_dir}"])
            if code:
                failed.append(f"{engine}/{label}: exit {code}")
                continue
            _store(run_dir, out / engine / label)
        print(f"{engine}: {len(cases)} cases", file=sys.stderr)
    if ranks:
        labels = [k for k in [*METHODS, *RANK_VARIANTS] if k in cases]
        specs = {k: _args(k) for k in labels if not _reads_every_input(k, scratch / "probe" / k)}
        port, env = str(_free_port()), {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        procs = [subprocess.Popen([sys.executable, __file__, "rank-child", str(scratch / "ranks"), json.dumps(specs)],
                                  env={**env, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2",
                                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
        logs = [p.communicate(timeout=1200)[0] for p in procs]
        if any(p.returncode for p in procs):
            failed.append("ranks: " + "\n".join(logs)[-3000:])
        for label in specs:
            if (scratch / "ranks" / label / "summary.json").is_file():  # finished
                _store(scratch / "ranks" / label, out / "ranks" / label)
        print(f"ranks: {len(specs)} cases", file=sys.stderr)
    shutil.rmtree(scratch, ignore_errors=True)
    if failed:
        sys.exit("failed runs:\n" + "\n".join(failed))


def _reads_every_input(label: str, out: Path) -> bool:
    """Whether the case's method reads clients' inputs on the server (a run on ranks refuses it)."""
    from fedcluster.config.run_config import load_raw, resolve
    from fedcluster.engine.runner import Run

    cfg, typed = resolve(load_raw(None, [*_args(label), f"out={out}"]))
    run = Run(cfg, typed)
    try:
        return run.alg.reads_every_input() is not None
    finally:
        run.dir.abandon()


def rank_child(root: Path, specs: dict[str, list[str]]) -> None:
    main = _main_of_cli()
    failed = []
    for label, args in specs.items():  # every case, also after one fails (both ranks fail it alike)
        try:
            code = main(["run", *args, f"out={root / label}"])
        except Exception as e:  # noqa: BLE001 - reported with the case's name, the other cases still run
            code = f"{type(e).__name__}: {e}"
        if code:
            failed.append(f"{label}: {code}")
    for name in ("fedcluster.engine.distributed", "fedcluster.engine.distributed.group", "fedcluster.app.launch"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "leave_group"):
            module.leave_group()
            break
    if failed:
        sys.exit("failed on ranks:\n" + "\n".join(failed))


def _close(a: str, b: str, tol: float) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) and math.isnan(y):
        return True
    return abs(x - y) <= tol * max(1.0, abs(x), abs(y))


def _cells(path: Path) -> list[list[str]]:
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            return [list(r) for r in csv.reader(f)]
    if path.suffix == ".json":
        return [[json.dumps(v)] for v in _leaves(json.loads(path.read_text()))]
    return [[json.dumps(v)] for line in path.read_text().splitlines() for v in _leaves(json.loads(line))]


def _leaves(value: Any, prefix: str = "") -> list[Any]:
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _leaves(value[k], f"{prefix}.{k}")]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _leaves(v, f"{prefix}[{i}]")]
    return [f"{prefix}={value}"] if not isinstance(value, int | float) or isinstance(value, bool) else [prefix, value]


def _compare_file(a: Path, b: Path, tol: float) -> tuple[str, str]:
    """('same' | 'close' | 'differ', detail)."""
    if a.read_bytes() == b.read_bytes():
        return "same", ""
    ca, cb = _cells(a), _cells(b)
    if len(ca) != len(cb) or any(len(x) != len(y) for x, y in zip(ca, cb, strict=False)):
        return "differ", "shape"
    worst = ""
    for i, (ra, rb) in enumerate(zip(ca, cb, strict=True)):
        for ea, eb in zip(ra, rb, strict=True):
            if ea != eb:
                if not _close(ea, eb, tol):
                    return "differ", f"row {i}: {ea} vs {eb}"
                worst = worst or f"row {i}: {ea} vs {eb}"
    return "close", worst


def compare(base: Path, new: Path, tol: float) -> int:
    bad = 0
    for engine in sorted(p.name for p in base.iterdir() if p.is_dir()):
        counts = {"same": 0, "close": 0, "differ": 0}
        for case in sorted(p.name for p in (base / engine).iterdir()):
            verdict, details = "same", []
            for name in FILES:
                fa, fb = base / engine / case / name, new / engine / case / name
                if not fa.exists() and not fb.exists():
                    continue
                if not fa.exists() or not fb.exists():
                    verdict, details = "differ", [*details, f"{name} missing"]
                    continue
                v, d = _compare_file(fa, fb, tol)
                if v != "same":
                    details.append(f"{name} {v} {d}")
                verdict = max(verdict, v, key=["same", "close", "differ"].index)
            counts[verdict] += 1
            if verdict != "same":
                print(f"  {engine}/{case}: {verdict}: {'; '.join(details)}")
        bad += counts["differ"]
        print(f"{engine}: {counts['same']} identical, {counts['close']} within {tol:g}, {counts['differ']} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "rank-child":
        rank_child(Path(sys.argv[2]), json.loads(sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("out", type=Path)
    s.add_argument("--only")
    s.add_argument("--no-ranks", action="store_true")
    s.add_argument("--engines", default=",".join(ENGINES), help="comma-separated engines to run, or none (ranks only)")
    c = sub.add_parser("compare")
    c.add_argument("base", type=Path)
    c.add_argument("new", type=Path)
    c.add_argument("--tol", type=float, default=1e-6)
    args = parser.parse_args()
    if args.mode == "snapshot":
        chosen = () if args.engines == "none" else tuple(args.engines.split(","))
        unknown = sorted(set(chosen) - set(ENGINES))
        if unknown:
            parser.error(f"unknown engine(s) {', '.join(unknown)}: choose from {', '.join(ENGINES)} or none")
        snapshot(args.out, args.only, not args.no_ranks, chosen)
    else:
        sys.exit(compare(args.base, args.new, args.tol))
