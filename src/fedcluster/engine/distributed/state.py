"""What every rank must hold alike: rank 0's algorithm state after each round, a check that the ranks agree,
and rank 0's input statistics when the federation is built.

Rank 0's result is authoritative: after each round :func:`share_state` broadcasts its algorithm state (JSON
structure + tensors, no pickle) and the other ranks load it, so ranks cannot drift apart even where a kernel is not
deterministic; :func:`check_same_state` then compares a fingerprint of the state across ranks (a check that the
state went across whole) and stops the run if they differ.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from fedcluster.engine.distributed.group import RankLost, rank
from fedcluster.engine.transfer import state_to_device
from fedcluster.errors import UserError
from fedcluster.storage.state_file import decode_state, encode_state


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
        alg.load_state_dict(state_to_device(decode_state(spec["tree"], received), device))


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


def broadcast_stats(stats: dict[str, list[float]] | None, failed: bool, device: torch.device
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
