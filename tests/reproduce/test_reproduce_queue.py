"""``fedcluster reproduce --all``: the unsettled experiments cheapest first, each published once all its seeds are
in (its records under docs/reproduction/in-progress until then), settled ones left alone, runs shared through the
run store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedcluster.app.cli import main
from fedcluster.reproduce import queue
from fedcluster.reproduce.experiments import EXPERIMENTS
from fedcluster.reproduce.results import Stored

CHEAP, DEAR = "s4-ablation-tehc-trhc", "s4-table1-fmnist"  # 3 runs a seed, and more


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout's published folder in a temporary directory, and a catalogue of two experiments."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs" / "reproduction").mkdir(parents=True)
    monkeypatch.setattr(queue, "EXPERIMENTS", {n: EXPERIMENTS[n] for n in (DEAR, CHEAP)})
    return tmp_path / "docs" / "reproduction"


def test_the_queue_runs_the_cheapest_first_and_publishes_each_when_its_seeds_are_in(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    order = [e.exp.name for e in queue.unsettled("tiny", 1, checkout, (checkout,))]
    assert order == [CHEAP, DEAR]
    assert main(["reproduce", "--all", "--budget", "tiny", "--seeds", "1", "--publish", "--set", "threads=1"]) == 0
    for name in (CHEAP, DEAR):
        held = Stored.load(checkout / f"{name}.json")
        assert held is not None and held.finished and held.budget == "tiny"
        assert (checkout / f"{name}.md").is_file()
        assert not (checkout / "in-progress" / f"{name}.json").exists()
    assert (checkout.parent / "REPRODUCTION.md").is_file()
    assert len(list((checkout / "store").glob("*/*.json"))) >= 3
    err = capsys.readouterr().err
    assert err.index(f"{CHEAP}: settled") < err.index(f"{DEAR}: settled")
    assert main(["reproduce", "--all", "--budget", "tiny", "--seeds", "1", "--publish"]) == 0
    assert "nothing to run" in capsys.readouterr().out


def test_a_stopped_queue_keeps_the_records_under_way_unpublished(checkout: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from fedcluster.reproduce import running

    real = running.run_experiment
    seen: list[str] = []

    def first_only(exp, args, out, path, store):  # type: ignore[no-untyped-def]
        seen.append(exp.name)
        if len(seen) > 1:
            return None  # as the time limit does: records so far kept, nothing published
        return real(exp, args, out, path, store)

    monkeypatch.setattr(running, "run_experiment", first_only)
    assert main(["reproduce", "--all", "--budget", "tiny", "--seeds", "1", "--publish", "--set", "threads=1"]) == 0
    assert seen == [CHEAP, DEAR]
    assert (checkout / f"{CHEAP}.json").is_file() and not (checkout / f"{DEAR}.json").exists()
    out = capsys.readouterr().out
    assert "settled 1 experiment(s); 1 left" in out and "the same command continues" in out


def test_a_larger_published_budget_is_settled(checkout: Path) -> None:
    Stored(CHEAP, "protocol", 3, "cpu", [], finished=True).save(checkout / f"{CHEAP}.json")
    assert [e.exp.name for e in queue.unsettled("tiny", 3, checkout, (checkout,))] == [DEAR]
    assert [e.exp.name for e in queue.unsettled("tiny", 5, checkout, (checkout,))] == [CHEAP, DEAR]  # fewer seeds


def test_publishing_over_another_budget_keeps_its_reading_under_that_budget(checkout: Path) -> None:
    old = Stored(CHEAP, "small", 3, "cpu", [], finished=True)
    old.save(checkout / f"{CHEAP}.json")
    (checkout / f"{CHEAP}.reading.md").write_text("small-budget reading")
    work = checkout / "in-progress"
    work.mkdir()
    new = Stored(CHEAP, "protocol", 3, "cpu", [], finished=True)
    new.save(work / f"{CHEAP}.json")
    queue.publish(EXPERIMENTS[CHEAP], new, work, checkout)
    assert json.loads((checkout / f"{CHEAP}.json").read_text())["budget"] == "protocol"
    assert (checkout / f"{CHEAP}.small.reading.md").read_text() == "small-budget reading"
    assert not (checkout / f"{CHEAP}.reading.md").exists() and not (work / f"{CHEAP}.json").exists()
    assert list(checkout.glob(f"{CHEAP}.previous-small-*.json"))


def test_the_queue_takes_no_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", CHEAP, "--all"]) == 2
    assert "--all runs every unsettled experiment" in capsys.readouterr().err


def test_the_queue_orders_by_what_an_entrys_own_run_says_it_needs(checkout: Path) -> None:
    """An entry whose published small-budget run took long enough to make its protocol budget the dearer one runs
    after the other, whatever their sizes' proxy says (the figure its page's "to settle it" column shows)."""
    for name in (CHEAP, DEAR):
        assert "protocol" in EXPERIMENTS[name].budgets
    proxy = {e.exp.name: e.hours for e in queue.unsettled("protocol", 3, checkout, (checkout,))}
    slow = proxy[DEAR] / proxy[CHEAP] * 10 * 3600  # a wall time that scales past DEAR's proxy
    Stored(CHEAP, "small", 3, "cpu", [], finished=True, wall_seconds=slow).save(checkout / f"{CHEAP}.json")
    entries = queue.unsettled("protocol", 3, checkout, (checkout,))
    assert [e.exp.name for e in entries] == [DEAR, CHEAP]
    assert entries[1].measured and entries[1].hours > proxy[DEAR]


def test_an_entry_under_way_costs_what_is_left_of_it(checkout: Path) -> None:
    whole = {e.exp.name: e.hours for e in queue.unsettled("protocol", 3, checkout, (checkout,))}
    runs = 3 * len(EXPERIMENTS[DEAR].pairs())
    records = [{"seed": i % 3, "setting": "s", "method": str(i), "metrics": {}} for i in range(runs - 1)]
    (checkout / "in-progress").mkdir()
    Stored(DEAR, "protocol", 3, "cpu", [], records=records).save(checkout / "in-progress" / f"{DEAR}.json")
    left = {e.exp.name: e.hours
            for e in queue.unsettled("protocol", 3, checkout, (checkout / "in-progress", checkout))}
    assert left[DEAR] == pytest.approx(whole[DEAR] / runs)
    assert left[CHEAP] == whole[CHEAP]


def _finish_at_once(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every experiment "runs" at once to a finished record; returns the (name, seeds) it was run with."""
    from fedcluster.reproduce import running

    ran: list[tuple[str, int]] = []

    def finished(exp, args, out, path, store):  # type: ignore[no-untyped-def]
        ran.append((exp.name, args.seeds))
        done = Stored(exp.name, args.budget, args.seeds, "cpu", [], finished=True)
        done.save(path)
        return done

    monkeypatch.setattr(running, "run_experiment", finished)
    return ran


def test_an_entry_whose_page_holds_more_seeds_runs_that_many_and_is_published(
        checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A protocol run over 3 seeds could not replace a small-budget page over 10 (the publishing guard), so the
    queue runs that entry over 10 seeds, costs it so, and publishes it."""
    ran = _finish_at_once(monkeypatch)
    three = {e.exp.name: e.hours for e in queue.unsettled("protocol", 3, checkout, (checkout,))}
    Stored(CHEAP, "small", 10, "cpu", [], finished=True).save(checkout / f"{CHEAP}.json")
    entries = {e.exp.name: e for e in queue.unsettled("protocol", 3, checkout, (checkout,))}
    assert (entries[CHEAP].seeds, entries[DEAR].seeds) == (10, 3)
    assert entries[CHEAP].hours == pytest.approx(three[CHEAP] * 10 / 3)
    assert main(["reproduce", "--all", "--budget", "protocol", "--seeds", "3", "--publish"]) == 0
    assert sorted(ran) == sorted([(CHEAP, 10), (DEAR, 3)])
    for name, seeds in ((CHEAP, 10), (DEAR, 3)):
        held = Stored.load(checkout / f"{name}.json")
        assert held is not None and (held.budget, held.seeds) == ("protocol", seeds)
    assert "10 seeds as its page holds" in capsys.readouterr().err


def test_an_entry_whose_page_holds_a_larger_budget_is_kept_unpublished_and_the_queue_goes_on(
        checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Protocol runs over 10 seeds do not replace a paper-budget page over 3 (the publishing guard): their records
    stay in in-progress, said in one line, and the next entry still runs and is published."""
    _finish_at_once(monkeypatch)
    Stored(CHEAP, "paper", 3, "cpu", [], finished=True).save(checkout / f"{CHEAP}.json")
    assert main(["reproduce", "--all", "--budget", "protocol", "--seeds", "10", "--publish"]) == 0
    held = Stored.load(checkout / f"{CHEAP}.json")
    assert held is not None and (held.budget, held.seeds) == ("paper", 3)  # the page with the larger budget stays
    assert (checkout / "in-progress" / f"{CHEAP}.json").is_file()  # the new records wait there
    published = Stored.load(checkout / f"{DEAR}.json")
    assert published is not None and published.budget == "protocol"  # and the queue went on
    assert f"{CHEAP}: finished, kept in" in capsys.readouterr().err
