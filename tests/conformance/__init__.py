"""The conformance suite: the checks every registered method passes, found from the registry (tests/conformance)."""
