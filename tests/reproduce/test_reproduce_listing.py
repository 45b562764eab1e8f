"""``fedcluster reproduce --list`` shows what each published page concludes: its verdict, budget and seeds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.reproduce.experiments import EXPERIMENTS
from fedcluster.reproduce.listing import page_verdict, stated
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.verdicts import STATUSES

ROOT = Path(__file__).resolve().parents[2]


def _publish(folder: Path, name: str, budget: str, seeds: int, status: str | None, finished: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    Stored(name, budget, seeds, "cpu", [], finished=finished).save(folder / f"{name}.json")
    if status is not None:
        (folder / f"{name}.md").write_text(f"# {name}: t\n\n- **Source:** s\n- **Claim:** c\n"
                                           f"- **Verdict at this budget:** {status} — because\n", encoding="utf-8")


def test_the_list_shows_each_published_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    published = tmp_path / "docs" / "reproduction"
    first, second, third = list(EXPERIMENTS)[:3]
    _publish(published, first, "protocol", 3, "does not hold")
    _publish(published, second, "small", 10, "tie")
    _publish(published, third, "small", 3, None, finished=False)  # no page: the budget and seeds alone
    assert main(["reproduce", "--list", "--out", str(tmp_path / "mine")]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines[first].endswith("[not yet run; published: does not hold (protocol, 3 seeds)]")
    assert lines[second].endswith("[not yet run; published: tie (small, 10 seeds)]")
    assert lines[third].endswith("[not yet run; published: small, 3 seeds, incomplete]")


def test_a_page_without_a_known_verdict_states_none(tmp_path: Path) -> None:
    page = tmp_path / "x.md"
    assert page_verdict(page) is None  # no page
    page.write_text("- **Verdict at this budget:** splendid — trust me\n", encoding="utf-8")
    assert page_verdict(page) is None  # not a status
    page.write_bytes(b"\xff\xfe- **Verdict")
    assert page_verdict(page) is None  # not text
    _publish(tmp_path, "x", "paper", 3, "holds")
    assert stated(tmp_path, Stored.load(tmp_path / "x.json")) == "holds (paper, 3 seeds)"


def test_the_published_pages_of_this_checkout_give_their_verdicts(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["reproduce", "--list", "--out", str(tmp_path)]) == 0
    shown = re.findall(r"published: (.*?) \(", capsys.readouterr().out)
    published = ROOT / "docs" / "reproduction"
    with_verdict = [n for n in EXPERIMENTS
                    if (published / f"{n}.json").is_file() and page_verdict(published / f"{n}.md")]
    assert len(shown) == len(with_verdict) > 0
    assert set(shown) <= {*STATUSES, "incomplete"}
