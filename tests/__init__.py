"""The test suite (a package, so test files in different folders may share a name; see README.md)."""
