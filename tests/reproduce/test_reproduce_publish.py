"""`fedcluster reproduce` writes a user's runs to their own folder; the published pages change only with --publish,
and never from a smaller budget or fewer seeds than they hold."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.reproduce import run_synthetic
from fedcluster.reproduce.experiments import get
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.spec import Budget, Experiment

NAME = "s2-mixreg-a"


def fake_mixreg(exp: Experiment, budget: Budget, seed: int, extra: Sequence[str], done: set, emit) -> None:
    """Stands in for the mixed-regression runner: one record per (setting, method) not yet done, no training."""
    for s in exp.settings:
        for m in exp.methods:
            if s.runs(m) and (s.name, m.label) not in done:
                emit({"seed": seed, "setting": s.name, "method": m.label, "seconds": 0.0, "curve": [[0, 1.0]],
                      "metrics": {x.key: 1.0 + seed for x in exp.metrics}})


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory laid out like a checkout whose published page holds small-budget results, 3 seeds."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_synthetic, "run_mixreg", fake_mixreg)
    pages = tmp_path / "docs" / "reproduction"
    pages.mkdir(parents=True)
    exp = get(NAME)
    stored = Stored(NAME, "small", 3, "cpu", [], finished=True, spec=repr(exp.budget("small")))
    for seed in range(3):
        fake_mixreg(exp, exp.budget("small"), seed, [], set(), stored.records.append)
    stored.save(pages / f"{NAME}.json")
    (pages / f"{NAME}.md").write_text("published page\n")
    (tmp_path / "docs" / "REPRODUCTION.md").write_text("published summary\n")
    return tmp_path


def _published(root: Path) -> tuple[str, str, str]:
    pages = root / "docs" / "reproduction"
    return ((pages / f"{NAME}.json").read_text(), (pages / f"{NAME}.md").read_text(),
            (root / "docs" / "REPRODUCTION.md").read_text())


def test_a_plain_run_writes_the_users_folder_and_leaves_the_published_pages(checkout: Path) -> None:
    before = _published(checkout)
    assert main(["reproduce", NAME, "--budget", "tiny", "--seeds", "1"]) == 0
    assert _published(checkout) == before
    assert json.loads((checkout / "runs" / "reproduction" / f"{NAME}.json").read_text())["budget"] == "tiny"
    assert (checkout / "runs" / "reproduction" / f"{NAME}.md").is_file()
    assert (checkout / "runs" / "REPRODUCTION.md").is_file()


@pytest.mark.parametrize("argv", [["--budget", "tiny", "--seeds", "1", "--publish"],
                                  ["--budget", "small", "--seeds", "2", "--publish"],
                                  ["--budget", "paper", "--seeds", "2", "--publish"],
                                  ["--budget", "tiny", "--seeds", "3", "--out", "docs/reproduction"],
                                  ["--report-only", "--seeds", "2", "--publish"]])
def test_published_results_are_never_replaced_by_a_smaller_budget_or_fewer_seeds(
        checkout: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    before = _published(checkout)
    assert main(["reproduce", NAME, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds small-budget results over 3 seeds" in err and len(err.splitlines()) == 1
    assert _published(checkout) == before


def test_publish_with_as_many_seeds_rewrites_the_published_pages(checkout: Path) -> None:
    assert main(["reproduce", NAME, "--budget", "small", "--seeds", "4", "--publish"]) == 0
    page, summary = _published(checkout)[1:]
    assert "--budget small --seeds 4" in page and NAME in summary
    assert main(["reproduce", NAME, "--report-only", "--publish"]) == 0


def test_help_lists_every_budget_it_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{small,protocol,paper,tiny}" in text and "--publish" in text


def test_list_shows_the_users_runs_and_the_published_ones(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "--list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(NAME + " "))
    assert line.endswith("[not yet run; published: small, 3 seeds]")


def test_a_folder_in_place_of_a_page_is_one_line(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = checkout / "docs" / "reproduction" / f"{NAME}.md"
    page.unlink()
    page.mkdir()
    assert main(["reproduce", NAME, "--report-only", "--publish"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a file" in err[0] and f"{NAME}.md" in err[0]


def test_report_only_without_a_name_rejudges_every_stored_page(checkout: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "--report-only", "--publish"]) == 0
    page, summary = _published(checkout)[1:]
    assert page != "published page\n" and "--budget small --seeds 3" in page
    assert f"| {NAME} |" in summary and "re-judged 1 experiments" in capsys.readouterr().out
    assert main(["reproduce", "--report-only", "--seeds", "2", "--publish"]) == 2
    (checkout / "docs" / "reproduction" / f"{NAME}.json").unlink()
    assert main(["reproduce", "--report-only", "--publish"]) == 2


def test_records_of_another_protocol_are_not_judged_as_this_one(checkout: Path, capsys: pytest.CaptureFixture) -> None:
    """A page describes the runs its records hold: when the experiment now names other settings (here another lr),
    re-judging it by name is refused with the command that reruns it; re-judging every page leaves it as it was,
    says so, and the summary says a rerun is needed instead of drawing a verdict."""
    path = checkout / "docs" / "reproduction" / f"{NAME}.json"
    stored = Stored.load(path)
    assert stored is not None
    stored.spec = get(NAME).protocol("small")
    stored.save(path)
    assert main(["reproduce", NAME, "--report-only", "--publish"]) == 0
    stored.spec = stored.spec.replace('"overrides": [', '"overrides": ["lr=0.05", ', 1)
    stored.save(path)
    before = _published(checkout)
    assert main(["reproduce", NAME, "--report-only", "--publish"]) == 2
    assert f"fedcluster reproduce {NAME} --budget small --fresh" in capsys.readouterr().err
    assert _published(checkout) == before
    assert main(["reproduce", "--report-only", "--publish"]) == 0
    assert "left 1 page(s) as they were" in capsys.readouterr().out
    after = _published(checkout)
    assert after[:2] == before[:2]  # the records and the page: as they were
    row = next(line for line in after[2].splitlines() if line.startswith(f"| {NAME} |"))
    assert "**rerun needed**" in row and f"fedcluster reproduce {NAME} --budget small --seeds 3 --fresh" in row
