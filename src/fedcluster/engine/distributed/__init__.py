"""One run over several processes (ranks) with torch.distributed: the process group, the state every rank must
share, the read-only run directory of ranks > 0 and the run loop of one rank."""
