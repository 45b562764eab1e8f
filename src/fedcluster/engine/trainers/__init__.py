"""Where the clients' work of a round runs: in this process or on remote nodes (over ranks: engine.distributed)."""
