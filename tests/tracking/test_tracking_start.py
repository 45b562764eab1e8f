"""Trackers start all or none: a logger that cannot start (W&B online without a login) leaves no MLflow run and no
TensorBoard file behind; the tracking page's read-back snippet works on the store the page's commands make."""

from __future__ import annotations

import importlib.util
import re
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedcluster.app.cli import main

ROOT = Path(__file__).parents[2]
NEEDS = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("mlflow", "tensorboard", "wandb",
                                                                              "pandas")),
                           reason="needs the tracking and wandb extras")
DEMO = [str(ROOT / "configs" / "demo.yaml"), "rounds=3", "progress=false"]


@pytest.fixture
def no_wandb_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc login
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    yield
    if sys.modules.get("wandb") is not None:
        sys.modules["wandb"].teardown()


def _all_runs(uri: str) -> list:
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = client.search_experiments(view_type=ViewType.ALL)
    return client.search_runs([e.experiment_id for e in experiments], run_view_type=ViewType.ALL)


@NEEDS
def test_a_tracker_that_cannot_start_leaves_nothing_in_the_others(tmp_path: Path, no_wandb_login: None,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "study" / "cfl"
    assert main(["run", *DEMO, f"out={out}", "tracking=[mlflow,tensorboard,wandb]"]) == 2
    assert "wandb login" in capsys.readouterr().err
    assert _all_runs(f"sqlite:///{tmp_path / 'study' / 'mlflow.db'}") == []
    assert not (out / "tensorboard").exists()


def _snippet() -> str:
    page = (ROOT / "docs" / "guide" / "tracking.md").read_text()
    section = page.split("## Reading it back", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@NEEDS
def test_the_read_back_snippet_of_the_tracking_page_works(tmp_path: Path, no_wandb_login: None,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for seed in (1, 2):  # the page's commands
        assert main(["run", *DEMO, f"seed={seed}", f"out=runs/study/cfl-{seed}", "tracking=mlflow"]) == 0
    assert main(["run", *DEMO, "out=runs/study/cfl-3", "tracking=[mlflow,tensorboard,wandb]"]) == 2
    (tmp_path / "snippet.py").write_text(_snippet())
    capsys.readouterr()
    scope = runpy.run_path(str(tmp_path / "snippet.py"))
    assert sorted(scope["runs"]["params.seed"]) == ["1", "2"] and len(scope["history"]) == 3
    assert "metrics.test_acc" in capsys.readouterr().out
