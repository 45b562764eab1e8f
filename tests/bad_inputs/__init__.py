"""The project's net of generated bad inputs (``python -m tests.bad_inputs``), one module per family."""
