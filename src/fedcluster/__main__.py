"""``python -m fedcluster ...``: the same as the ``fedcluster`` command."""

import sys

from fedcluster.cli import main

sys.exit(main())
