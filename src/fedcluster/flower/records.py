"""engine.trainers.remote requests and replies as Flower records (ArrayRecord + ConfigRecord; no pickle)."""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedcluster.engine.trainers.remote import Arrays, Request
from fedcluster.flower.wire import ARRAYS, RUN, TASK


def to_record(arrays: Arrays) -> ArrayRecord:
    return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in arrays.items()})


def from_record(record: ArrayRecord) -> Arrays:
    return {k: v.numpy() for k, v in record.items()}


def _scalar(v: object) -> int | float | str | bool:
    return v.item() if isinstance(v, np.generic) else v  # type: ignore[return-value]


def request_content(req: Request, config_yaml: str) -> RecordDict:
    """The message content of one request; the run's resolved config travels beside it so that a node
    needs nothing but its partition id."""
    task = {k: _scalar(v) for k, v in req.config.items()}
    task.update(kind=req.kind, client=int(req.client))
    return RecordDict({ARRAYS: to_record(req.arrays), TASK: ConfigRecord(task),
                       RUN: ConfigRecord({"config": config_yaml})})


def wire_bytes(content: RecordDict) -> int:
    """Bytes of a message's arrays as serialised on the wire (ArrayRecord.count_bytes)."""
    return sum(r.count_bytes() for r in content.array_records.values())
