"""Where the clients' work of a round runs: in process, on this rank's share of the clients, or on remote nodes."""
