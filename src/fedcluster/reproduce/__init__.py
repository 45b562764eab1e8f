"""``fedcluster reproduce``: the papers' headline results, paper vs ours over seeds, as one command each.

The registry (:mod:`.experiments`) and the experiment specifications are plain Python (``--list`` imports no
PyTorch); the runners (``run_*.py``) execute configurations through :class:`fedcluster.engine.runner.Run`
in-process; :mod:`.pages` writes ``docs/reproduction/NAME.md`` and the ``docs/REPRODUCTION.md`` summary.
"""
