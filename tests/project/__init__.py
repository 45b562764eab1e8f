"""Tests of the repository around the package: documentation, README, packaging, install and benchmark scripts,
the package's layers."""
