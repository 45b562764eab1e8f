"""Starting a run over several processes: ``fedcluster run ... ranks=N`` and ``fedcluster resume`` under
torchrun's elastic agent (:func:`launch`), the run loop each process runs (:func:`new_run`), rank > 0's side of
a resume, and the one-line reports of a rank that failed or lost its peer. The rounds themselves are
:mod:`fedcluster.engine.distributed.ranks`'s.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from fedcluster.config.run_config import RunConfig, load_raw, resolve
from fedcluster.engine.distributed.env import check_ranks, collective_timeout, in_torchrun
from fedcluster.engine.distributed.follower import FollowerRunDir
from fedcluster.engine.distributed.group import RankLost
from fedcluster.engine.distributed.ranks import Ranks
from fedcluster.engine.runner import Run
from fedcluster.tracking.run_dir import default_run_dir

EXIT_RANK_LOST = 4  # a rank whose peer went away (the launcher names the rank that failed first)
LAUNCHED = "FEDCLUSTER_LAUNCHED"  # set by :func:`launch` in its ranks: they leave the one-line report to it


def new_run(cfg: RunConfig, typed: dict[str, Any], **kwargs: Any) -> Run:
    """The run loop for this process: under torchrun with this rank's clients (:class:`Ranks`), else with every
    client in this process."""
    return Run(cfg, typed, placement=Ranks() if in_torchrun() else None, **kwargs)


def follower_resume(path: Path, overrides: list[str]) -> tuple[RunConfig, dict[str, Any]]:
    """Rank > 0's view of ``fedcluster resume``: the run's config with ``overrides``, without the lock (rank 0
    checks what may change and refuses for everyone: torchrun then stops the other ranks)."""
    raw = load_raw(path / "config.yaml", overrides)
    raw["out"] = str(path)
    return resolve(raw)


def stop_quietly(e: RankLost) -> int:
    """A rank whose peer went away: one line under plain torchrun, none when :func:`launch` reports it."""
    if not os.environ.get(LAUNCHED):
        r = os.environ.get("RANK", "?")
        print(f"fedcluster: rank {r} lost contact with another rank ({' '.join(str(e).split())[:120]}); "
              "torchrun's report names the rank that failed", file=sys.stderr)
    return EXIT_RANK_LOST


# -- the launcher of `fedcluster run ... ranks=N` ------------------------------------------------------
def launch(command: list[str], ranks: int, run_dir: Path) -> int:
    """Run ``python -m fedcluster COMMAND...`` as ``ranks`` processes under torchrun's elastic agent on this
    machine; a rank that fails ends the run with one line naming it and how to resume."""
    os.environ.setdefault("LOGLEVEL", "CRITICAL")  # torch.distributed.elastic's loggers: fedcluster reports
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed"):  # its "failed (exitcode ...)" would follow fedcluster's line
            logging.getLogger(name).setLevel(logging.CRITICAL)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does: N ranks share the cores
    os.environ[LAUNCHED] = "1"
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=ranks, run_id=uuid.uuid4().hex,
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0, start_method="spawn")
    try:
        elastic_launch(config, sys.executable)("-m", "fedcluster", *command)
    except ChildFailedError as e:
        return _report_failure(e, run_dir)
    except SignalException as e:  # Ctrl-C or a kill of this process: the agent stopped the ranks
        if e.sigval != signal.SIGINT:  # on Ctrl-C rank 0 said where the results are
            print(f"fedcluster: stopped by {signal.Signals(e.sigval).name}; `fedcluster resume {run_dir}` "
                  "continues from its last checkpoint", file=sys.stderr)
        return 128 + int(e.sigval)
    return 0


def _report_failure(e: Any, run_dir: Path) -> int:
    failures = e.failures  # global rank -> ProcessFailure
    # the ranks that failed on their own: not those that lost their peer, that the agent stopped (SIGTERM) or that
    # gloo aborted because their peer went away (SIGABRT)
    consequences = (EXIT_RANK_LOST, -signal.SIGTERM, -signal.SIGABRT)
    causes = {r: f for r, f in failures.items() if f.exitcode not in consequences} or failures
    r = min(causes, key=lambda k: (causes[k].timestamp, k))
    f = causes[r]
    how = f"was killed by {signal.Signals(-f.exitcode).name}" if f.exitcode < 0 else f"exited with status {f.exitcode}"
    if f.exitcode in (2, 3):  # rank 0 printed the one line (bad input, divergence); keep its status
        return f.exitcode
    resume = ""
    if (run_dir / "config.yaml").is_file():
        resume = f"; `fedcluster resume {run_dir}` continues from its last checkpoint"
    print(f"fedcluster: rank {r} {how}; the run stopped{resume}", file=sys.stderr)
    return 1


def launch_run(items: list[str], cfg: RunConfig) -> int:
    """``fedcluster run ... ranks=N``: name the run directory here (so the one-line report can point at it),
    then start the ranks with ``out=`` set to it."""
    check_ranks(cfg.ranks, cfg.num_clients, cfg.device)
    collective_timeout()  # a bad FEDCLUSTER_COLLECTIVE_TIMEOUT: one line here, not one per rank
    out = Path(cfg.out) if cfg.out else default_run_dir(cfg.algorithm, cfg.scenario)
    if not cfg.out:
        out.rmdir()  # claimed to reserve the name; rank 0 makes it again
    return launch(["run", *items, f"out={out}"], cfg.ranks, out)


def launch_resume(path: Path, overrides: list[str], ranks: int) -> int:
    cfg = follower_resume(path, overrides)[0]
    check_ranks(ranks, cfg.num_clients, cfg.device)
    collective_timeout()
    return launch(["resume", str(path), *overrides], ranks, path)



def resume_follower(path: Path, overrides: list[str]) -> int:
    """``fedcluster resume`` on a rank > 0: the same decision as rank 0 (nothing to do once finished), then the
    rounds with a read-only view of the run directory."""
    cfg, typed = follower_resume(path, overrides)
    run_dir = FollowerRunDir(path)
    if run_dir.checkpoint.exists() and (path / "summary.json").is_file() \
            and int(run_dir.load_checkpoint()["round"]) == cfg.rounds:
        return 0
    Run(cfg, typed, resume=True, run_dir=run_dir, placement=Ranks()).execute()
    return 0
