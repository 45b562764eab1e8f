"""The round engine in rooms, each importing only the rooms below it: shared modules (parameters, copies to the
device, memory, devices, sampling), ``training/`` and ``evaluation/``, the contract (``protocol``: Backend and
RoundResult; ``algorithm``: what the methods implement; ``placement``: where clients work), the backends that run
the clients' work (``backends/``: in process, remote; ``distributed/``: over the ranks of a torchrun job), and the
run loop with its callbacks on top."""
