"""``python -m fedcluster ...``: the same as the ``fedcluster`` command."""

import sys

from fedcluster.app.cli import main

code = main()
if code == 0 and "fedcluster.engine.distributed.group" in sys.modules:  # a rank of a torchrun job leaves its group
    sys.modules["fedcluster.engine.distributed.group"].leave_group()
sys.exit(code)
