"""Run directories: which folders a run may use, stale files, and what ``fedcluster resume`` may change."""

from __future__ import annotations

import csv
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from fedcluster.app.cli import main
from fedcluster.storage import folders

FAST = ["num_clients=6", "progress=false", "model.hidden=[16]", "checkpoint_every=2"]


def _numbers(out: Path) -> list[list[str]]:
    with (out / "rounds.csv").open() as f:
        return [[v for k, v in r.items() if k != "seconds"] for r in csv.DictReader(f)]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("fedcluster:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 4-round run (used read-only, or copied)."""
    out = tmp_path_factory.mktemp("runs") / "done"
    assert main(["run", *FAST, "rounds=4", f"out={out}"]) == 0
    return out


def test_folder_with_other_files_is_refused_untouched(tmp_path: Path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["run", *FAST, "rounds=1", f"out={tmp_path}"]) == 2
    assert "not a fedcluster run" in _one_line(capsys.readouterr().err)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("")
    assert main(["run", *FAST, "rounds=1", f"out={tmp_path / 'file'}"]) == 2
    assert "not a folder" in _one_line(capsys.readouterr().err)


def test_run_stopped_before_its_first_checkpoint_starts_over_without_stale_files(tmp_path: Path, capsys,
                                                                                  finished: Path) -> None:
    out = tmp_path / "again"
    assert main(["run", *FAST, "rounds=3", "seed=9", f"out={out}"]) == 0  # another run's files ...
    (out / "checkpoint.pt").unlink()  # ... as if it had been killed before its first checkpoint
    (out / "summary.json").unlink()
    (out / "extra.txt").write_text("stale")
    capsys.readouterr()
    assert main(["run", *FAST, "rounds=4", f"out={out}"]) == 0
    assert "starting it again" in capsys.readouterr().err
    assert _numbers(out) == _numbers(finished)  # no stale row mixed in
    assert not (out / "extra.txt").exists()
    assert yaml.safe_load((out / "config.yaml").read_text())["seed"] == 0


def test_resume_without_a_checkpoint_starts_from_round_zero(tmp_path: Path, capsys, finished: Path) -> None:
    out = tmp_path / "early"
    assert main(["run", *FAST, "rounds=4", f"out={out}"]) == 0
    for name in ("checkpoint.pt", "summary.json", "clients.csv"):
        (out / name).unlink()
    with (out / "rounds.csv").open("a") as f:
        f.write("9,0.5\n")  # a torn row
    capsys.readouterr()
    assert main(["resume", str(out)]) == 0
    assert "starting it again from round 0" in capsys.readouterr().err
    assert _numbers(out) == _numbers(finished)


@pytest.mark.parametrize("override", ["seed=1", "data_seed=4", "num_clients=7", "lr=0.5", "model.hidden=[8]",
                                      "algorithm=ifca", "scenario.concepts=2", "engine=sequential", "out=/tmp/x"])
def test_resume_refuses_keys_that_change_the_experiment(finished: Path, capsys, override: str) -> None:
    before = (finished / "rounds.csv").read_bytes()
    assert main(["resume", str(finished), "rounds=5", override]) == 2
    line = _one_line(capsys.readouterr().err)
    key = override.split("=")[0].split(".")[0]
    assert key in line and ("may change" in line or "cannot change" in line)
    if key != "out":
        assert "only rounds, eval_every, checkpoint_every, progress, threads, workers, tracking" in line
    assert (finished / "rounds.csv").read_bytes() == before


def test_resume_refuses_a_hand_edited_config(tmp_path: Path, capsys, finished: Path) -> None:
    import shutil

    out = tmp_path / "edited"
    shutil.copytree(finished, out)
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    cfg["lr"] = 0.3
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["resume", str(out), "rounds=5"]) == 2
    assert "cannot change lr" in _one_line(capsys.readouterr().err)


def test_resume_records_what_it_used_and_a_finished_run_has_nothing_to_do(tmp_path: Path, capsys) -> None:
    out = tmp_path / "grow"
    assert main(["run", *FAST, "rounds=2", f"out={out}"]) == 0
    assert main(["resume", str(out), "rounds=3", "eval_every=3", "threads=1", "workers=1"]) == 0
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert (cfg["rounds"], cfg["eval_every"], cfg["threads"], cfg["workers"]) == (3, 3, 1, 1)
    capsys.readouterr()
    stamp = (out / "rounds.csv").stat().st_mtime_ns
    assert main(["resume", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines() == [f"fedcluster: {out} has finished all 3 rounds; nothing to do "
                                                 "(pass rounds=N with N > 3 to extend it)"]
    assert captured.err == "" and (out / "rounds.csv").stat().st_mtime_ns == stamp
    assert main(["resume", str(out), "rounds=2"]) == 2
    assert "fewer than the 3 rounds" in _one_line(capsys.readouterr().err)


def test_run_directory_of_an_older_version_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "old"
    out.mkdir()
    (out / "rounds.csv").write_text("round\n1\n")
    (out / "checkpoint.pt").write_bytes(b"PK\x03\x04")
    assert main(["run", *FAST, "rounds=1", f"out={out}"]) == 2
    assert "older fedcluster version" in _one_line(capsys.readouterr().err)


SAME_SECOND = "20250101-120000"  # the clock every default folder name below reads


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(folders, "stamp", lambda: SAME_SECOND)
    for seed in (0, 1):
        assert main(["run", *FAST, "rounds=1", f"seed={seed}"]) == 0
    first, second = (Path("runs") / f"{SAME_SECOND}-fedavg-concept-swap{s}" for s in ("", "-2"))
    assert sorted(Path("runs").iterdir()) == [first, second]  # the first keeps today's name
    for seed, folder in enumerate((first, second)):
        assert yaml.safe_load((folder / "config.yaml").read_text())["seed"] == seed
        assert json.loads((folder / "summary.json").read_text())["run_dir"] == str(folder)
        assert len(_numbers(folder)) == 1 and (folder / "checkpoint.pt").is_file()
    # a refused run of the same second leaves no folder behind (its claimed -3 is removed again)
    monkeypatch.setenv("FEDCLUSTER_MEMORY_LIMIT", "50M")
    capsys.readouterr()
    assert main(["run", *FAST, "rounds=1", "model.hidden=20000"]) == 2
    assert "training needs" in _one_line(capsys.readouterr().err)
    assert sorted(Path("runs").iterdir()) == [first, second]


def test_a_refused_first_run_leaves_no_empty_runs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", *FAST, "rounds=1", "dataset=mnist"]) == 2  # refused after its folder was claimed
    assert "data_dir" in _one_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []
    Path("runs").mkdir()  # a runs/ folder the user made is kept
    assert main(["run", *FAST, "rounds=1", "dataset=mnist"]) == 2
    assert list(tmp_path.iterdir()) == [tmp_path / "runs"] and list(Path("runs").iterdir()) == []


def test_claiming_a_folder_is_race_free(tmp_path: Path) -> None:
    base = tmp_path / "runs" / f"{SAME_SECOND}-demo"
    base.parent.mkdir()
    (base.parent / f"{base.name}-3").write_text("")  # a file takes a name too
    with ThreadPoolExecutor(8) as pool:
        claimed = list(pool.map(lambda _: folders.claim_new_dir(base), range(12)))
    assert len(set(claimed)) == 12 and all(p.is_dir() for p in claimed)
    assert {p.name for p in claimed} == {base.name} | {f"{base.name}-{n}" for n in (2, *range(4, 14))}
