"""One run over several processes (ranks) with torch.distributed: each rank trains its share of a round's units.

Every rank runs the same program (``torchrun --nproc-per-node N -m fedcluster run ...``, or ``fedcluster run
... ranks=N``, which starts torchrun's elastic agent itself). The clients' work of a round is cut by client:
client ``c`` belongs to rank ``c % world``. :class:`ShardedTrainer` trains the units of its own clients with the
in-process engine (the same vectorised, dense, pool or sequential path) and puts every rank's results back in
unit order with one ``all_reduce`` (each entry has exactly one non-zero contribution, so the sum is exact and
every rank holds bitwise the same stack); the E-step's per-sample losses are reduced the same way. A unit's
batches are seeded by (seed, round, client, stream), never by its position in the cohort, so a sharded round
trains exactly the units of the single-process round.

Each rank holds the inputs of its own clients only (:mod:`fedcluster.data.sharded`; labels, offsets and ground
truth stay whole): after building the federation a rank drops the other ranks' clients' inputs. Server-side
computations on clients' data are per client (``Trainer.per_client``: evaluation, the weights of clients never
sampled, prototypes, signatures): each rank computes those of its clients and one ``all_reduce`` gathers
them, exactly as for training. A method setting whose server reads every input (:meth:`Algorithm.
reads_every_input`) is refused with more than one rank.

The server's steps (aggregation, E-step statistics, clustering, splits, merges) then run on every rank on
bitwise identical inputs. Rank 0's result is authoritative: after each round :func:`share_state` broadcasts its
algorithm state (JSON structure + tensors, no pickle) and the other ranks load it, so ranks cannot drift apart
even where a kernel is not deterministic; :class:`DistributedRun` then compares a fingerprint of the state
across ranks (a check that the state went across whole) and stops the run if they differ.
Only rank 0 writes the run directory (rounds, checkpoints, summary, tracking); a resumed run reads the
checkpoint on every rank (for several machines the run directory must be on a shared file system).

Backends: gloo on the CPU, NCCL on CUDA (one GPU per local rank). A rank that dies ends the run: torchrun's
agent stops the others, and ``fedcluster run ... ranks=N`` prints one line naming the rank.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import datetime
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from fedcluster.config.run_config import RunConfig
from fedcluster.data.build import build_federation, cache_key, cache_path
from fedcluster.data.federation import Federation
from fedcluster.data.normalize import standardize_with
from fedcluster.data.sharded import ShardedSplit, read_share, shard_federation
from fedcluster.engine.algorithm import RoundResult
from fedcluster.engine.params import Params
from fedcluster.engine.rank_env import collective_timeout, world_from_env
from fedcluster.engine.runner import Run, summarize, to_device
from fedcluster.engine.solver import Solver
from fedcluster.engine.training import Trainer
from fedcluster.errors import ConfigError, UserError
from fedcluster.storage.state_file import StateFileError, decode_state, encode_state
from fedcluster.tracking.run_dir import RunDir, default_run_dir


class RankLost(RuntimeError):
    """A collective failed: another rank stopped (killed, crashed) or stopped answering."""


def in_torchrun() -> bool:
    return world_from_env()[1] > 1


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def start(device: str) -> None:
    """Join the process group of this torchrun job (once): NCCL when the run computes on CUDA, else gloo."""
    if dist.is_initialized():
        return
    if device != "cpu" and torch.cuda.is_available():
        local, gpus = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
        if local >= gpus:
            raise UserError(f"local rank {local} has no GPU of its own ({gpus} on this machine): start at most "
                            f"{gpus} ranks per machine with device={device}, or use device=cpu")
        torch.cuda.set_device(local)
        backend = "nccl"
    else:
        backend = "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=collective_timeout()))


def leave_group() -> None:
    """Leave the process group once every rank has finished, before the process exits (no-op outside one):
    gloo aborts a process that exits while still a member."""
    if dist.is_available() and dist.is_initialized():
        with contextlib.suppress(RuntimeError, dist.DistBackendError):
            dist.barrier()
            dist.destroy_process_group()


def owned(clients: np.ndarray, rank_: int, world: int) -> np.ndarray:
    """Positions of ``clients`` whose client belongs to ``rank_`` (client c: rank c % world)."""
    return np.flatnonzero(np.asarray(clients, dtype=np.int64) % world == rank_)


def _all_reduce(tensors: list[torch.Tensor]) -> None:
    """Sum ``tensors`` in place over the ranks: one collective per dtype."""
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        flat = torch.cat([t.reshape(-1) for t in group])
        try:
            dist.all_reduce(flat)
        except (RuntimeError, dist.DistBackendError) as e:
            raise RankLost(str(e)) from None
        i = 0
        for t in group:
            t.copy_(flat[i:i + t.numel()].view_as(t))
            i += t.numel()


class ShardedTrainer(Trainer):
    """A :class:`Trainer` that trains only this rank's clients and gathers every rank's results (module
    docstring); the algorithms call it as they call the in-process one. Its ``x``/``y``/``ptr`` are the held
    clients' rows (``split.local()``); ``split`` maps the algorithms' global rows to them."""

    split: ShardedSplit | None = None

    def sibling(self, module: torch.nn.Module, loss: Any) -> Trainer:
        t = super().sibling(module, loss)
        t.split = self.split  # type: ignore[attr-defined]
        return t

    def per_client(self, split: Any, compute: Any, clients: np.ndarray | None = None) -> np.ndarray:
        if world_size() == 1 or not isinstance(split, ShardedSplit):
            return super().per_client(split, compute, clients)
        mine = np.asarray(compute(split.local()))
        held = (split.held if clients is None else split.held[clients]).reshape(-1, *[1] * (mine.ndim - 1))
        out = torch.from_numpy(np.where(held, mine, 0).astype(np.float64)).to(self.device)
        _all_reduce([out])  # each client's values come from its one rank: the sum is exact
        return out.cpu().numpy().astype(mine.dtype)

    def train(self, init: Params, clients: np.ndarray, solver: Solver, round_: int,
              weights: list[np.ndarray] | None = None, anchor: Params | None = None, stream: int = 0,
              init_index: np.ndarray | None = None) -> Params:
        clients = np.asarray(clients, dtype=np.int64)
        first = next(iter(init.values()))
        if world_size() == 1 or first.device.type == "meta":
            return super().train(init, clients, solver, round_, weights, anchor, stream, init_index)
        mine = owned(clients, rank(), world_size())
        idx = torch.as_tensor(mine, device=first.device)
        full = {k: v.new_zeros((len(clients), *v.shape[1:])) for k, v in init.items()}
        if len(mine):
            if init_index is None:
                part_init, part_index = {k: v.index_select(0, idx) for k, v in init.items()}, None
            else:
                part_init, part_index = init, np.asarray(init_index)[mine]
            part_anchor = None if anchor is None else {k: v.index_select(0, idx.to(v.device))
                                                       for k, v in anchor.items()}
            part_weights = None if weights is None else [weights[u] for u in mine]
            out = super().train(part_init, clients[mine], solver, round_, part_weights, part_anchor, stream,
                                part_index)
            for k in full:
                full[k][idx] = out[k].to(full[k].dtype)
        _all_reduce(list(full.values()))
        self._watch(full, clients)  # every rank learns of every diverged client
        return full

    def losses(self, models: Params, rows: np.ndarray, shared_body: bool = False) -> np.ndarray:
        if world_size() == 1:
            return super().losses(models, rows, shared_body)
        assert self.split is not None, "a sharded trainer needs its split"
        rows = np.asarray(rows, dtype=np.int64)
        owner = np.searchsorted(self.split.ptr, rows, side="right") - 1
        mine = owned(owner, rank(), world_size())
        k = len(next(iter(models.values())))
        full = np.zeros((len(rows), k))
        if len(mine):
            full[mine] = super().losses(models, self.split.local_rows(rows[mine]), shared_body)
        out = torch.from_numpy(full).to(self.device)
        _all_reduce([out])
        return out.cpu().numpy()


def state_fingerprint(state: Any) -> torch.Tensor:
    """A float64 vector that two ranks with bitwise equal states share: per tensor or array its size, sum,
    sum of absolute values and NaN count; per scalar its value; the structure's keys and lengths."""
    out: list[float] = []

    def walk(obj: Any) -> None:
        if isinstance(obj, torch.Tensor | np.ndarray):
            t = torch.as_tensor(obj).detach().to("cpu", torch.float64)
            out.extend([t.numel(), float(t.nan_to_num(0.0).sum()), float(t.nan_to_num(0.0).abs().sum()),
                        float(t.isnan().sum())])
        elif isinstance(obj, dict):
            out.append(len(obj))
            for key in sorted(obj, key=str):
                out.append(len(str(key)))
                walk(obj[key])
        elif isinstance(obj, list | tuple):
            out.append(len(obj))
            for v in obj:
                walk(v)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            walk({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
        elif isinstance(obj, bool | int | float | np.number):
            v = float(obj)
            out.append(0.0 if v != v else v)
        elif isinstance(obj, str):
            out.append(len(obj))
    walk(state)
    return torch.tensor(out, dtype=torch.float64)


def share_state(alg: Any, device: torch.device) -> None:
    """Rank 0's algorithm state on every rank (the others load it): the structure as JSON and the tensors
    flattened per dtype, three broadcasts and no pickle. Ranks then agree even where a kernel is not
    deterministic (e.g. atomics on a GPU)."""
    where = device if device.type == "cuda" else torch.device("cpu")
    lead = rank() == 0
    tree, tensors = encode_state(alg.state_dict()) if lead else ("", {})
    layout = [[n, str(t.dtype).removeprefix("torch."), list(t.shape)] for n, t in tensors.items()]
    head = json.dumps({"tree": tree, "tensors": layout}).encode() if lead else b""
    try:
        size = torch.tensor([len(head)], dtype=torch.int64, device=where)
        dist.broadcast(size, 0)
        text = (torch.frombuffer(bytearray(head), dtype=torch.uint8).to(where) if lead
                else torch.empty(int(size), dtype=torch.uint8, device=where))
        dist.broadcast(text, 0)
        spec = json.loads(bytes(text.cpu().numpy()).decode())
        by_dtype: dict[str, list[list[Any]]] = {}
        for entry in spec["tensors"]:
            by_dtype.setdefault(entry[1], []).append(entry)
        received: dict[str, torch.Tensor] = {}
        for dtype_name, entries in by_dtype.items():
            dtype = getattr(torch, dtype_name)
            wire = torch.uint8 if dtype == torch.bool else dtype  # gloo sends no bool
            if lead:
                flat = torch.cat([tensors[n].reshape(-1).to(wire) for n, _, _ in entries]).to(where)
            else:
                flat = torch.empty(sum(math.prod(shape) for _, _, shape in entries), dtype=wire, device=where)
            dist.broadcast(flat, 0)
            i = 0
            for name, _, shape in entries:
                n = math.prod(shape)
                received[name] = flat[i:i + n].to("cpu", dtype).reshape(shape)
                i += n
    except (RuntimeError, dist.DistBackendError) as e:
        raise RankLost(str(e)) from None
    if not lead:
        alg.load_state_dict(to_device(decode_state(spec["tree"], received), device))


def check_same_state(state: Any, round_: int, device: torch.device) -> None:
    """Stop the run if the ranks' algorithm states differ after round ``round_`` (they must not)."""
    mine = state_fingerprint(state).to(device)
    try:
        n = torch.tensor([len(mine), -len(mine)], dtype=torch.float64, device=device)
        dist.all_reduce(n, op=dist.ReduceOp.MAX)
        same = int(n[0]) == -int(n[1])
        if same:
            lo, hi = mine.clone(), mine.clone()
            dist.all_reduce(lo, op=dist.ReduceOp.MIN)
            dist.all_reduce(hi, op=dist.ReduceOp.MAX)
            same = bool(torch.equal(lo, hi))
    except (RuntimeError, dist.DistBackendError) as e:
        raise RankLost(str(e)) from None
    if not same:
        raise RuntimeError(f"the ranks' algorithm states differ after round {round_}: a server-side step is not "
                           "deterministic across processes; run it with one process")


def _return_freed_memory() -> None:
    """Give the heap memory freed while reading or building the federation back to the system (glibc keeps
    freed blocks below its trim threshold, tens of megabytes, in the process otherwise); nothing elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _broadcast_stats(stats: dict[str, list[float]] | None, failed: bool, device: torch.device
                     ) -> dict[str, list[float]] | None:
    """Rank 0's input statistics (``data.normalize``; None when the inputs are not standardised) on every
    rank, as float64 tensors; raises on every rank when rank 0 could not build the federation."""
    where = device if device.type == "cuda" else torch.device("cpu")
    channels = len(stats["mean"]) if stats is not None else 0
    head = torch.tensor([float(failed), channels], dtype=torch.float64, device=where)
    body = torch.tensor([*stats["mean"], *stats["std"]] if stats else [], dtype=torch.float64, device=where)
    try:
        dist.broadcast(head, 0)
        if int(head[1]) and rank() != 0:
            body = torch.zeros(2 * int(head[1]), dtype=torch.float64, device=where)
        if int(head[1]):
            dist.broadcast(body, 0)
    except (RuntimeError, dist.DistBackendError) as e:
        raise RankLost(str(e)) from None
    if head[0] and rank() != 0:
        raise UserError("rank 0 could not build the federation (it printed why)")
    if not int(head[1]):
        return None
    values = body.cpu().tolist()
    return {"mean": values[:len(values) // 2], "std": values[len(values) // 2:]}


class FollowerRunDir(RunDir):
    """The run directory as ranks other than 0 see it: read-only (the checkpoint to resume from); every
    write is rank 0's."""

    def acquire(self, new: bool) -> bool:
        return False

    def release(self) -> None:
        pass

    def abandon(self) -> None:
        pass

    def create(self, config_yaml: str) -> None:
        pass

    def write_config(self, config_yaml: str) -> None:
        pass

    def restart_at(self, completed: int) -> list[dict[str, float]]:
        return []

    def append_round(self, row: dict[str, Any]) -> None:
        pass

    def append_jsonl(self, name: str, record: dict[str, Any]) -> None:
        pass

    def write_clients(self, rows: list[dict[str, Any]]) -> None:
        pass

    def write_summary(self, summary: dict[str, Any]) -> None:
        pass

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        pass


class DistributedRun(Run):
    """The in-process run loop on one rank of a torchrun job (module docstring)."""

    def __init__(self, cfg: RunConfig, typed: dict[str, Any], resume: bool = False,
                 fed: Federation | None = None, run_dir: RunDir | None = None) -> None:
        start(cfg.device)
        self.rank, self.world = rank(), world_size()
        if self.rank != 0:
            cfg.progress = False
            cfg.tracking = []
            path = run_dir.path if run_dir is not None else Path(cfg.out or "runs/rank-follower")
            run_dir = FollowerRunDir(path)
        elif run_dir is None and not cfg.out:  # the default folder is rank 0's to name
            run_dir = RunDir(default_run_dir(cfg.algorithm, cfg.scenario))
        super().__init__(cfg, typed, resume, fed, run_dir)

    def load_federation(self) -> Federation:
        """Rank 0 builds the federation (or reads the cache) and writes the cache; the other ranks then read
        only their clients' inputs from the cache file (all of it, then drop the rest, when it could not be
        written). Image inputs are standardised with the whole federation's statistics, which rank 0 sends."""
        if self.world == 1:
            return super().load_federation()
        cfg, params = self.cfg, self.typed["scenario"]
        fed, failed = None, False
        if self.rank == 0:
            try:
                fed = build_federation(cfg, params)
            except BaseException:
                failed = True  # the others must not wait: they stop too, rank 0 says why
                _broadcast_stats(None, failed, self.device)
                raise
        stats = _broadcast_stats(fed.info.get("normalization") if fed is not None else None, failed, self.device)
        if self.rank == 0:
            return fed
        path, key = cache_path(cfg, params), cache_key(cfg, params)
        try:
            fed = read_share(path, key, self.rank, self.world)
        except (StateFileError, OSError):  # no cache (e.g. not writable): build it whole, hold() drops the rest
            return build_federation(cfg, params, use_cache=False)
        return standardize_with(fed, stats) if stats is not None else fed

    def hold(self, fed: Federation) -> Federation:
        """Only this rank's clients' inputs (module docstring)."""
        if self.world > 1 and not isinstance(fed.train, ShardedSplit):
            fed = shard_federation(fed, self.rank, self.world)
        _return_freed_memory()
        return fed

    def _build(self, fed: Federation | None) -> None:
        super()._build(fed)
        if self.world > 1 and (why := self.alg.reads_every_input()) is not None:
            raise UserError(f"{self.cfg.algorithm} with {why} needs every client's inputs in one process; run "
                            "it without ranks (ranks=1), or choose another setting")

    def make_trainer(self, module: torch.nn.Module) -> Trainer:
        cfg, tr = self.cfg, self.fed.train
        if cfg.client_momentum == "keep":
            raise ConfigError("client_momentum=keep runs in one process: use ranks=1 (the ranks would each hold "
                              "only their own clients' buffers)")
        local = tr.local()
        trainer = ShardedTrainer(module, local.x, local.y, local.ptr, self.fed.task, seed=cfg.seed,
                                 path=self.engine_path, workers=cfg.workers, precision=cfg.precision,
                                 chunk_mb=cfg.chunk_mb)
        trainer.split = tr if isinstance(tr, ShardedSplit) else None
        return trainer

    def play_round(self, t: int) -> RoundResult:
        res = super().play_round(t)
        share_state(self.alg, self.device)
        check_same_state(self.alg.state_dict(), t + 1, self.device if self.device.type == "cuda" else
                         torch.device("cpu"))
        return res

    def finish(self, rows: list[dict[str, Any]], val_acc: np.ndarray, elapsed: float) -> dict[str, Any]:
        self.alg.assignment()  # may gather from every rank (a client never trained): all of them take part
        if self.rank == 0:
            return super().finish(rows, val_acc, elapsed)
        return summarize(rows) | {"wall_seconds": elapsed, "run_dir": str(self.dir.path)}
