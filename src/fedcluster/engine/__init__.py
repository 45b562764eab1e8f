"""The round engine: sampling, the training kernels, the backends that run the clients' work (in process, sharded
over ranks, remote), evaluation, and the run loop with its callbacks."""
