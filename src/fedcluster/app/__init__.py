"""The application layer: the ``fedcluster`` command (cli), the library API (api), the demo, the ``list`` and
reference texts (describe, reference_page) and the start of multi-process runs under torchrun (launch)."""
