"""Tests of fedcluster.storage: state files, atomic writes and run folders."""
