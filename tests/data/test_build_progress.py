"""A rough edge a newcomer saw: a federation's build shows its progress on stderr (silent with progress=false)."""

from __future__ import annotations

import pytest

import fedcluster


def test_federation_build_shows_progress_unless_disabled(capsys: pytest.CaptureFixture[str]) -> None:
    fedcluster.build_federation({"num_clients": 5, "progress": True}, use_cache=False)
    assert "building clients" in capsys.readouterr().err
    fedcluster.build_federation({"num_clients": 5, "progress": False}, use_cache=False)
    assert capsys.readouterr().err == ""
