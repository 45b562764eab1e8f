"""A stored reproduction is continued only under the protocol it was made with: every override of the budget, the
experiment, its settings and its methods; a changed note or description does not matter."""

from __future__ import annotations

from dataclasses import replace

from fedcluster.reproduce.experiments import get
from fedcluster.reproduce.results import Stored

EXP = get("s3-merge")


def _stored(spec: str) -> Stored:
    return Stored(EXP.name, "small", 3, "cpu", ["threads=1"], spec=spec)


def _matches(stored: Stored, exp=EXP) -> bool:  # type: ignore[no-untyped-def]
    return stored.matches("small", "cpu", ["threads=1"], exp.protocol("small"), repr(exp.budget("small")))


def test_a_changed_method_override_starts_afresh() -> None:
    stored = _stored(EXP.protocol("small"))
    assert _matches(stored)
    madmo = next(m for m in EXP.methods if m.label == "cfl (MADMO)")
    changed = replace(EXP, methods=tuple(replace(m, overrides=(*m.overrides, "algorithm.tol1=0.4"))
                                         if m is madmo else m for m in EXP.methods))
    assert not _matches(stored, changed)
    assert not _matches(stored, replace(EXP, overrides=(*EXP.overrides, "lr=0.05")))
    assert not stored.matches("small", "cpu", [], EXP.protocol("small"), "")  # another --set


def test_a_changed_note_or_description_does_not() -> None:
    small = EXP.budgets["small"]
    reworded = replace(EXP, title="another title", budgets={**EXP.budgets, "small": replace(small, note="reworded")})
    assert _matches(_stored(EXP.protocol("small")), reworded)


def test_older_files_match_on_the_budgets_numbers_and_overrides() -> None:
    small = EXP.budgets["small"]
    assert _matches(_stored(repr(replace(small, note="an older note", model="an older description"))))
    assert not _matches(_stored(repr(replace(small, rounds=small.rounds + 1))))
    assert not _matches(_stored(repr(replace(small, overrides=(*small.overrides, "batch_size=16")))))
    for crafted in ("__import__('os').system('true')", "Budget(clients=" + "(" * 5000, "x" * 20000, "[1, 2]"):
        assert not _matches(_stored(crafted))
