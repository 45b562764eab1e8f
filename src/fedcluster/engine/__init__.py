"""The round engine in rooms, each importing only the rooms below it: shared modules (parameters, copies to the
device, memory, devices, sampling), ``training/`` and ``evaluation/``, the contract (``protocol``: Trainer and
RoundResult; ``algorithm``: what the methods implement; ``placement``: where clients work), the trainers that do
the clients' work (``trainers/``: in process, remote; ``distributed/``: over the ranks of a torchrun job), and the
run loop with its callbacks on top."""
