"""``python -m fedcluster ...`` is the ``fedcluster`` command."""

from fedcluster.cli import main

raise SystemExit(main())
