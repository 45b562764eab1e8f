"""Local training: the kernels that train units (sequential, vectorised, dense, one by one), their batches, losses,
momentum buffers, precision and worker pool."""
