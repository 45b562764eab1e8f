"""One run over several processes (ranks) with torch.distributed: the Ranks placement of the run loop, the sharded
backend, the process group, the state every rank must share and the read-only run directory of ranks > 0."""
