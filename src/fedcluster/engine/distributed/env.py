"""What a run over several processes reads from its environment, checked: the rank and world size torchrun sets,
the collective timeout, and how many ranks this machine can run.

Every value is read when it is needed (never at import, so a bad variable does not break runs that never use
it) and a bad one is a :class:`~fedcluster.errors.UserError` naming the variable. ``RANK``/``WORLD_SIZE`` left
behind by an outer job (an enclosing torchrun or SLURM step) without torchrun's ``MASTER_ADDR`` do not make a
plain ``fedcluster run`` join a process group that does not exist: they are ignored with a warning, and the run
works in one process.
"""

from __future__ import annotations

import math
import os
import sys

from fedcluster.errors import UserError

TIMEOUT_VARIABLE = "FEDCLUSTER_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week: beyond it a stuck rank is never noticed
RANKS_PER_CORE = 4  # CPU ranks a core may carry (they mostly wait on each other's collectives)
_warned: set[str] = set()


def collective_timeout() -> float:
    """Seconds a collective may wait (``FEDCLUSTER_COLLECTIVE_TIMEOUT``, default 600)."""
    text = os.environ.get(TIMEOUT_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        raise UserError(f"{TIMEOUT_VARIABLE}={text[:40]!r} is not a number of seconds in (0, {MAX_TIMEOUT_S:.0f}]: "
                        f"set it to e.g. 600, or unset it")
    return value


def _integer(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return int(text)
    except ValueError:
        raise UserError(f"the environment variable {name}={text[:40]!r} is not an integer: unset it (torchrun sets "
                        "it for the processes it starts)") from None


def in_torchrun() -> bool:
    """Whether this process is one rank of several (torchrun set its environment)."""
    return world_from_env()[1] > 1


def world_from_env() -> tuple[int, int]:
    """(rank, world size) of this process as torchrun sets them; (0, 1) outside torchrun, and where an outer
    job left ``RANK``/``WORLD_SIZE`` without ``MASTER_ADDR`` (with a warning, once)."""
    world = _integer("WORLD_SIZE", 1)
    rank = _integer("RANK", 0)
    if world <= 1 and rank == 0:
        return 0, 1
    if not os.environ.get("MASTER_ADDR"):
        if "outer" not in _warned:
            _warned.add("outer")
            print(f"fedcluster: warning: RANK={rank} and WORLD_SIZE={world} are set but MASTER_ADDR is not (left by "
                  "an outer job?); they are ignored and the run works in one process (unset them to silence this)",
                  file=sys.stderr)
        return 0, 1
    if world < 1 or not 0 <= rank < world:
        raise UserError(f"the environment says RANK={rank} of WORLD_SIZE={world}: a rank lies in 0..WORLD_SIZE-1; "
                        "start the processes with torchrun, which sets both")
    return rank, world


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_ranks(ranks: int, num_clients: int, device: str) -> None:
    """Refuse (one line naming the limit) ``ranks`` processes for a run of ``num_clients`` clients that this
    machine cannot run: more ranks than clients (a rank would hold none), more than one GPU each on CUDA, more
    than ``RANKS_PER_CORE`` per CPU core otherwise."""
    if ranks > num_clients:
        raise UserError(f"ranks={ranks} exceeds the {num_clients} clients (each rank needs at least one client): "
                        f"use ranks={max(1, num_clients)} or fewer")
    import torch

    if device != "cpu" and torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        if ranks > gpus:
            raise UserError(f"ranks={ranks} exceeds the {gpus} GPUs of this machine (one GPU a rank): use "
                            f"ranks={gpus} or fewer, or device=cpu")
        return
    limit = RANKS_PER_CORE * usable_cpus()
    if ranks > limit:
        raise UserError(f"ranks={ranks} exceeds what this machine can run on its CPUs ({RANKS_PER_CORE} ranks a "
                        f"core, {usable_cpus()} cores: at most {limit}): use ranks={limit} or fewer")
