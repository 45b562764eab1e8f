"""The run loop: build everything from a config, then for each round play it, evaluate it when due and hand it to
the loop's callbacks (the divergence watch, rounds.csv and clusters.jsonl, tracking, progress, checkpoints:
:mod:`fedcluster.engine.callbacks`); a resumed run first restores its checkpoint
(:mod:`fedcluster.engine.checkpointing`). Where the clients work is a part the loop is given
(``placement=``, :mod:`fedcluster.engine.placement`): in this process by default, on the ranks of a torchrun job, or
on Flower nodes."""

from __future__ import annotations

import contextlib
import dataclasses
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
import torch
from threadpoolctl import threadpool_limits

from fedcluster._version import __version__
from fedcluster.catalog.registry import ALGORITHMS
from fedcluster.config.notes import note
from fedcluster.config.run_config import RunConfig, dump_config
from fedcluster.data.build import build_federation
from fedcluster.data.drift import Drift
from fedcluster.data.federation import Federation
from fedcluster.engine.algorithm import Algorithm, Context
from fedcluster.engine.budget import check_federation_fits, fit_run
from fedcluster.engine.callbacks import (
    Announce,
    Callbacks,
    Progress,
    RoundCallback,
    RoundEnd,
    RoundFiles,
    Tracking,
)
from fedcluster.engine.checkpointing import Checkpointing, restore
from fedcluster.engine.device import (
    check_channels_last,
    check_client_momentum,
    check_engine,
    configure,
    device_name,
    resolve_device,
)
from fedcluster.engine.divergence import DivergenceWatch
from fedcluster.engine.evaluation.holdout import with_fit_rows
from fedcluster.engine.evaluation.scores import missing_validation_note
from fedcluster.engine.in_process import InProcess
from fedcluster.engine.interrupts import sigint_held
from fedcluster.engine.memory import model_footprint
from fedcluster.engine.params import state_bytes
from fedcluster.engine.placement import Placement
from fedcluster.engine.protocol import RoundResult, Trainer
from fedcluster.engine.round_evaluation import device_scores, evaluate, to_host  # noqa: F401  (re-exported)
from fedcluster.engine.sampling import participation_stream
from fedcluster.engine.solver import Solver
from fedcluster.engine.training.kernels import auto_path
from fedcluster.errors import DivergedError, InterruptedRun
from fedcluster.models.base import build_model
from fedcluster.storage.atomic import writing
from fedcluster.tracking.loggers import open_tracking
from fedcluster.tracking.plots import plot_accuracy
from fedcluster.tracking.run_dir import RunDir, default_run_dir, rounds_span


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def versions(device: torch.device | None = None) -> dict[str, str]:
    out = {"fedcluster": __version__, "python": platform.python_version(),
           "torch": torch.__version__, "numpy": np.__version__, "scikit-learn": sklearn.__version__}
    return out if device is None else out | {"device": device_name(device)}


class Run:
    """One experiment: ``Run(cfg, typed).execute()`` returns the summary dict. ``placement`` is where the clients
    work (:class:`~fedcluster.engine.placement.Placement`; default: in this process; ``backend`` is its earlier
    name, still accepted), ``callbacks`` are called after the loop's own each round."""

    def __init__(self, cfg: RunConfig, typed: dict[str, Any], resume: bool = False,
                 fed: Federation | None = None, run_dir: RunDir | None = None,
                 callbacks: Sequence[RoundCallback] = (), placement: Placement | None = None,
                 backend: Placement | None = None) -> None:
        self.cfg, self.typed, self.resume = cfg, typed, resume
        self.placement = placement or backend or InProcess()
        run_dir = self.placement.prepare(cfg, run_dir)
        self.announcement: str | None = None  # printed once the trackers have started (the CLI's summary)
        self.user_callbacks = list(callbacks)  # called after the run's own, each round's files already written
        if cfg.threads is not None:
            torch.set_num_threads(cfg.threads)
        made_runs = run_dir is None and not cfg.out and not Path("runs").exists()  # the default parent, made now
        self.dir = run_dir or RunDir(Path(cfg.out) if cfg.out else default_run_dir(cfg.algorithm, cfg.scenario))
        if self.dir.acquire(new=not resume):
            print(f"fedcluster: note: {self.dir.path} held a run that stopped before its first checkpoint; "
                  "starting it again", file=sys.stderr)
        try:
            self.dir.check_writable()  # a full or read-only folder said before the federation is built
            self._build(fed)
            self.dir.check_space(state_bytes(self.alg.state_dict()))  # and before its summary
        except KeyboardInterrupt:
            self.dir.release()
            raise InterruptedRun(f"interrupted before the first round; run the same command again to start "
                                 f"over (out={self.dir.path} may be reused)") from None
        except BaseException:
            if resume:
                self.dir.release()
            else:
                self.dir.abandon()
                if made_runs:  # a refused first run leaves no empty runs/ either
                    with contextlib.suppress(OSError):
                        Path("runs").rmdir()
            raise

    def _auto_path(self, activation_bytes: int | None = None) -> str:
        """engine=auto's choice; with client_momentum=keep the CPU pool becomes one loop per client (the pool's
        workers cannot keep the buffers)."""
        path = auto_path(self.cfg.model, self.device, self.cfg.precision, activation_bytes=activation_bytes)
        return "sequential" if self.cfg.client_momentum == "keep" and path.startswith("pool") else path

    def _build(self, fed: Federation | None) -> None:
        cfg, typed = self.cfg, self.typed
        self.device = resolve_device(cfg.device)
        path = self._auto_path() if cfg.engine == "auto" else cfg.engine
        check_engine(path, self.device, cfg.precision)
        check_client_momentum(path, cfg.client_momentum)
        configure(self.device, cfg.deterministic)
        if fed is None:
            check_federation_fits(cfg, typed["scenario"])
            fed = self.load_federation()
        fed = self.hold(fed).to(self.device)  # the one host-to-device copy of the data
        self.fed = dataclasses.replace(fed, test=with_fit_rows(fed.test, cfg.test_fit, cfg.seed))
        self.drift = Drift.of(self.fed)  # None for a static federation: nothing is relabelled
        if self.drift is not None:  # the run relabels its own copy of the labels, never the caller's federation
            self.placement.check_drift(cfg)
            self.fed = self.drift.own_labels(self.fed)
        if cfg.num_clients != self.fed.num_clients:  # scenarios with a fixed population
            cfg.num_clients = self.fed.num_clients
        fit_run(cfg, typed, self.fed)  # caps batch_size/workers, refuses what would not fit in memory
        if cfg.engine == "auto":  # on an accelerator large models train unit by unit (engine.training.looped)
            fp = model_footprint(cfg, typed, self.fed)
            path = self._auto_path(activation_bytes=fp and fp.activations)
        if (message := missing_validation_note(self.fed.val)) is not None:
            note(message)
        torch.manual_seed(cfg.seed)
        module = build_model(cfg.model, self.fed.input_shape, self.fed.output_dim, typed["model"]).to(self.device)
        check_channels_last(path, cfg.channels_last)
        self.engine_path = path
        trainer = self.make_trainer(module)
        solver = Solver(lr=cfg.lr, epochs=cfg.local_epochs, batch_size=cfg.batch_size, momentum=cfg.momentum,
                        weight_decay=cfg.weight_decay, drop_last=cfg.drop_last)
        self.ctx = Context(cfg, self.fed, module, trainer, solver)
        self.alg: Algorithm = ALGORITHMS.get(cfg.algorithm).obj(self.ctx, typed["algorithm"])
        self.stream = participation_stream(self.fed.num_clients, cfg.cohort_size(), cfg.rounds, cfg.seed)
        self.placement.check(self.alg, cfg)

    def load_federation(self) -> Federation:
        """The run's federation, built or read from the cache (or as the placement reads it: a rank its share)."""
        fed = self.placement.load_federation(self.cfg, self.typed, self.device)
        return fed if fed is not None else build_federation(self.cfg, self.typed["scenario"])

    def hold(self, fed: Federation) -> Federation:
        """The part of the federation this process keeps (the placement's: all of it, or a rank's clients)."""
        return self.placement.hold(fed)

    def make_trainer(self, module: torch.nn.Module) -> Trainer:
        """The clients' work (local training, E-step losses, per-client computations), from the placement."""
        return self.placement.trainer(module, self.fed, self.cfg, self.engine_path, self.device)

    def play_round(self, t: int) -> RoundResult:
        """One round with this round's sampled clients, as the placement plays it."""
        return self.placement.play_round(self.alg, t, self.stream[t])

    def follow_drift(self, t: int) -> None:
        """A drifting federation moves to the concepts of round t + 1 before it is played (data.drift): the
        clients that change are relabelled in place, the placement refreshes what its trainer holds of them and
        the method drops what it cached from their labels; a static federation is left alone."""
        if self.drift is None:
            return
        changed = self.drift.apply(self.fed, t + 1)
        if len(changed):
            self.placement.data_changed(self.ctx.trainer, changed)
            self.alg.data_changed(changed)

    def execute(self) -> dict[str, Any]:
        try:
            with open_tracking(self.cfg, self.dir.path) as self.tracking, blas_threads(self.cfg.threads):
                return self._execute()
        finally:
            self.dir.release()

    def callbacks(self) -> list[RoundCallback]:
        """What the round loop does with each round, in this order: the divergence watch (it may stop the run
        before the round's row is kept), rounds.csv and clusters.jsonl, tracking, the federation's summary, progress,
        checkpoints, then the callbacks the caller passed (``Run(..., callbacks=[...])``,
        ``fedcluster.run(..., callbacks=[...])``)."""
        return [self.watch, RoundFiles(self.dir), Tracking(self.tracking), Announce(self.announcement),
                Progress(self.cfg.algorithm, self.cfg.rounds, self.cfg.progress), self.checkpoints,
                *self.user_callbacks]

    def _execute(self) -> dict[str, Any]:
        cfg = self.cfg
        if self.resume:
            first, elapsed, rows = restore(self.dir, cfg, self.alg, self.ctx.module, self.fed, self.ctx.trainer,
                                           self.device)
        else:
            self.dir.create(dump_config(cfg))
            first, elapsed, rows = 0, 0.0, []
        self.watch = DivergenceWatch(self.alg, self.ctx.trainer, self.fed.task, self.fed.output_dim,
                                     unscored=self._unscored())
        self.checkpoints = Checkpointing(self.dir, cfg, self.alg, self.ctx.trainer, first)
        callbacks = Callbacks(self.callbacks())
        callbacks.on_start(first, rows)
        val_acc = np.full(self.fed.num_clients, np.nan)
        done = first
        try:
            for t in range(first, cfg.rounds):
                t0 = time.perf_counter()
                last = t == cfg.rounds - 1
                self.follow_drift(t)
                res = self.play_round(t)
                metrics: dict[str, float] = {}
                if (t + 1) % cfg.eval_every == 0 or last:  # the round's checks come back with the scores
                    self.watch.queue(t + 1)
                    metrics, val_acc = self._evaluate(self.watch)
                callbacks.on_played(t + 1, metrics)
                seconds = time.perf_counter() - t0
                elapsed += seconds
                row = round_row(t + 1, metrics, res, self.alg.num_clusters, seconds, cfg.eval_train)
                with sigint_held():  # the row, its clusters and its checkpoint: all written or none
                    rows.append(row)
                    callbacks.on_round(RoundEnd(t + 1, row, res, metrics, rows, elapsed, last))
                    done = t + 1
        except DivergedError as e:
            raise DivergedError(f"{e}; {self._diverged_note(done, self.checkpoints.last)}") from None
        except KeyboardInterrupt:
            raise InterruptedRun(f"interrupted in round {done + 1}; {self._kept(done, self.checkpoints.last)}"
                                 ) from None
        finally:
            callbacks.on_finish()
            self.ctx.trainer.close()
        if np.isnan(val_acc).all() and self.fed.task == "classification":
            _, val_acc = evaluate(self.alg, self.fed)
        return self.finish(rows, val_acc, elapsed)

    def _evaluate(self, watch: DivergenceWatch) -> tuple[dict[str, float], np.ndarray]:
        """:func:`evaluate` with the round's queued divergence checks; models that diverged may make the
        evaluation itself fail, so its error gives way to the divergence the checks find."""
        try:
            return evaluate(self.alg, self.fed, self.cfg.eval_train, watch)
        except DivergedError:
            raise
        except Exception:
            watch.check_now()
            raise

    def _unscored(self) -> tuple[str, ...]:
        """The losses a divergence check may not read: a split without samples has a NaN loss by design."""
        return tuple(k for k, split in (("val_loss", self.fed.val), ("test_loss", self.fed.test))
                     if split.sizes.sum() == 0)

    def _rows_kept(self, t: int) -> str:
        return f"{rounds_span(1, t)} {'is' if t == 1 else 'are'} in {self.dir.rounds_csv}"

    def _kept(self, t: int, checkpointed: int) -> str:
        """Where the results of rounds 1..t are and how to continue from the last checkpoint."""
        done = self._rows_kept(t) if t else f"no round finished ({self.dir.path})"
        if checkpointed:
            return f"{done}; `fedcluster resume {self.dir.path}` continues from the checkpoint of round {checkpointed}"
        return f"{done}; `fedcluster resume {self.dir.path}` starts it again (no checkpoint yet)"

    def _diverged_note(self, t: int, checkpointed: int) -> str:
        done = self._rows_kept(t) if t else "no round finished"
        if checkpointed:
            return (f"{done} and the checkpoint of round {checkpointed} is kept; start a new run with a smaller "
                    f"lr (now {self.cfg.lr:g}) and another out=")
        return (f"{done}; no checkpoint was written; run again with a smaller lr (now {self.cfg.lr:g}); "
                f"out={self.dir.path} may be reused")

    def finish(self, rows: list[dict[str, Any]], val_acc: np.ndarray, elapsed: float) -> dict[str, Any]:
        assign = self.alg.assignment()  # may gather from every rank (a client never trained): all of them take part
        if not self.placement.lead:
            return summarize(rows) | {"wall_seconds": elapsed, "run_dir": str(self.dir.path)}
        trained = self.stream.ever_sampled(self.cfg.rounds)
        self.dir.write_clients([
            {"client": i, "true_cluster": int(self.fed.true_cluster[i]), "cluster": int(assign[i]),
             "val_acc": float(val_acc[i]), "train_samples": int(self.fed.train.sizes[i]),
             "style": int(self.fed.style[i]), "trained": int(trained[i])}
            for i in range(self.fed.num_clients)
        ])
        summary = summarize(rows)
        summary.update(wall_seconds=round(elapsed, 3), versions=versions(self.device), git_revision=git_revision(),
                       federation=self.fed.summary(), algorithm=self.cfg.algorithm,
                       scenario=self.cfg.scenario, dataset=self.cfg.dataset, run_dir=str(self.dir.path))
        self.dir.write_summary(summary)
        with writing(self.dir.path / "accuracy.png", self.dir.hint):
            plot_accuracy(rows, self.dir.path / "accuracy.png",
                          f"{self.cfg.algorithm} on {self.cfg.dataset}/{self.cfg.scenario}")
        return summary


def round_row(round_: int, metrics: dict[str, float], res: RoundResult, num_clusters: int, seconds: float,
              eval_train: bool) -> dict[str, Any]:
    """A rounds.csv row: the evaluation's metrics (NaN on rounds not evaluated), K, bytes, seconds and the method's
    own columns."""
    return {"round": round_, **{k: metrics.get(k, float("nan")) for k in ("val_acc", "test_acc", "ari")},
            "num_clusters": num_clusters, "bytes_up": res.bytes_up, "bytes_down": res.bytes_down,
            "seconds": seconds, "val_loss": metrics.get("val_loss", float("nan")),
            "test_loss": metrics.get("test_loss", float("nan")),
            **({"train_acc": metrics.get("train_acc", float("nan"))} if eval_train else {}), **res.extra}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Final values, best values (with their rounds) and the FedRC paper's 'at the round of best validation'."""
    evaluated = [r for r in rows if not (np.isnan(r["val_loss"]) and np.isnan(r["test_loss"]))]
    keys = ("val_acc", "test_acc", "ari", "num_clusters", "val_loss", "test_loss")
    final = {k: rows[-1][k] for k in keys} if rows else {}
    best: dict[str, Any] = {}
    for k, better in (("val_acc", max), ("test_acc", max), ("ari", max), ("val_loss", min), ("test_loss", min)):
        vals = [r for r in evaluated if not np.isnan(r[k])]
        if vals:
            r = better(vals, key=lambda r, k=k: r[k])
            best[k] = {"value": r[k], "round": int(r["round"])}
    at_best_val = {}
    if "val_acc" in best:
        r = next(r for r in evaluated if r["round"] == best["val_acc"]["round"])
        at_best_val = {k: r[k] for k in keys}
    return {"rounds": len(rows), "final": final, "best": best, "at_best_val": at_best_val,
            "max_clusters": max((int(r["num_clusters"]) for r in rows), default=0)}


def blas_threads(threads: int | None) -> contextlib.AbstractContextManager:
    """NumPy's BLAS/LAPACK (the methods' Gram matrices, SVDs and eigensolvers) limited to the run's ``threads``, as
    torch is: OpenBLAS otherwise starts one thread per core, and its spinning threads on cores other work shares
    make a CFL-GP clustering step of 64 clients take ~5 s instead of ~0.2 s."""
    if not threads:
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")
