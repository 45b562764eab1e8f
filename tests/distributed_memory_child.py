"""What one process of a run holds in memory once the run is built: ``python distributed_memory_child.py
KEY=VALUE...`` prints one JSON line with the bytes of the federation's data tensors it keeps, those its
trainer reads, and its resident memory. Under torchrun's env (RANK, WORLD_SIZE, ...) it is one rank of the
run; without, the single-process run."""

from __future__ import annotations

import gc
import json
import os
import sys

from fedcluster.config import load_raw, resolve
from fedcluster.data.sharded import held_bytes
from fedcluster.engine import distributed


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    cfg, typed = resolve(load_raw(None, sys.argv[1:]))
    run = distributed.run_class()(cfg, typed)
    gc.collect()
    trainer, splits = run.ctx.trainer, (run.fed.train, run.fed.val, run.fed.test)
    print(json.dumps({"rank": distributed.rank(), "held": held_bytes(run.fed),
                      "inputs": sum(s.local().x.nbytes for s in splits),
                      "trainer": trainer.x.nbytes + trainer.y.nbytes, "rss": resident_bytes()}))
    run.dir.abandon()
