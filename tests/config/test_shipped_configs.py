"""The configs the CLI names ship with the package: `configs/NAME.yaml` works outside a clone (the shipped copy,
with a note), and `fedcluster init` copies them into a folder without overwriting a user's edits."""

from __future__ import annotations

from pathlib import Path

import pytest

import fedcluster
from fedcluster.app.cli import main
from fedcluster.config import shipped as shipped_configs
from fedcluster.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_ships_every_config_of_the_source_tree() -> None:
    in_tree = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert "demo.yaml" in in_tree and shipped_configs.names() == in_tree
    for name in in_tree:
        assert (shipped_configs.SHIPPED / name).read_bytes() == (ROOT / "configs" / name).read_bytes()


def test_configs_name_resolves_to_the_shipped_copy_outside_a_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys) -> None:
    monkeypatch.chdir(tmp_path)
    cfg, _ = fedcluster.load_config("configs/demo.yaml", rounds=3)
    assert cfg.dataset == "digits" and cfg.rounds == 3
    assert "configs/demo.yaml is not in this folder: using the copy shipped" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="does not exist"):  # only names that ship fall back
        fedcluster.load_config("configs/mine.yaml")
    with pytest.raises(ConfigError, match="does not exist"):  # and only under configs/
        fedcluster.load_config("demo.yaml")


def test_a_local_file_wins_over_the_shipped_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "demo.yaml").write_text("dataset: digits\nrounds: 7\n")
    assert fedcluster.load_config("configs/demo.yaml")[0].rounds == 7
    assert "shipped" not in capsys.readouterr().err


def test_the_demos_next_step_runs_outside_a_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fedcluster run configs/demo.yaml algorithm=ifca ...` as the demo prints it, one round, from an empty folder."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "configs/demo.yaml", "algorithm=ifca", "algorithm.num_clusters=3", "rounds=1",
                 "progress=false", "out=ifca"]) == 0
    assert (tmp_path / "ifca" / "rounds.csv").is_file()


def test_init_copies_the_configs_and_keeps_edits(tmp_path: Path, capsys) -> None:
    assert main(["init", str(tmp_path)]) == 0
    copied = sorted(p.name for p in (tmp_path / "configs").iterdir())
    assert copied == shipped_configs.names()
    assert (tmp_path / "configs" / "demo.yaml").read_bytes() == (ROOT / "configs" / "demo.yaml").read_bytes()
    assert f"wrote {len(copied)} of the {len(copied)} config files" in capsys.readouterr().out
    (tmp_path / "configs" / "demo.yaml").write_text("rounds: 3\n")
    (tmp_path / "configs" / "s3-cflgp-lines.yaml").unlink()
    assert main(["init", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"wrote 1 of the {len(copied)} config files" in out and "demo.yaml" in out.split("kept")[1]
    assert (tmp_path / "configs" / "demo.yaml").read_text() == "rounds: 3\n"
    assert (tmp_path / "configs" / "s3-cflgp-lines.yaml").is_file()


def test_init_into_an_unwritable_place_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("")
    assert main(["init", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot create" in err
