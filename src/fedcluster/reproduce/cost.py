"""What a paper budget needs on a CPU, computed from a run at a smaller budget (plain data: no PyTorch).

The small run's wall time is scaled by the paper budget's rounds, clients × share of their data and seeds, then
by the paper model's training cost over the small budget's model, measured per SGD step of 32 images on one CPU
thread with ``benchmarks/speed/model_step_cost.py`` (2026-11-27, a shared 2-core CPU).
A rough figure: it does not count the extra test images a paper budget scores when the small one capped them,
nor that fixed per-round costs weigh less at the paper's scale; the pages say so where it applies.
"""

from __future__ import annotations

from fedcluster.reproduce.spec import Budget

STEP_MS = {"MLP": 1.9, "CNN": 122.0, "MobileNetV2": 834.0}  # ms per SGD step, see the module docstring
CPU_HOURS_LIMIT = 24.0  # above this a paper budget is said to need a GPU


def model_kind(budget: Budget) -> str:
    """The budget's model family, by the words that describe it ("" for the linear and logistic models)."""
    text = budget.model
    return next((k for k in ("MobileNetV2", "CNN", "MLP") if k in text), "")


def paper_cpu_hours(small: Budget, paper: Budget, wall_seconds: float, seeds: int, want_seeds: int = 3
                    ) -> tuple[float, float]:
    """(hours with the small budget's model, hours with the paper's model) for ``want_seeds`` seeds."""
    data = (paper.clients * paper.fraction) / max(small.clients * small.fraction, 1e-9)
    base = wall_seconds * (paper.rounds / small.rounds) * data * (want_seeds / max(seeds, 1)) / 3600
    a, b = model_kind(small), model_kind(paper)
    ratio = STEP_MS[b] / STEP_MS[a] if a and b and a != b else 1.0
    return base, base * ratio


def budget_cpu_hours(here: Budget, there: Budget, wall_seconds: float, seeds: int, want_seeds: int = 3) -> float:
    """CPU hours of ``want_seeds`` seeds at budget ``there`` (its model), computed from a run of ``seeds`` seeds at
    budget ``here`` that took ``wall_seconds``: sizes, rounds, model and learning-rate grid scaled."""
    grid = max(len(there.lr_grid), 1) / max(len(here.lr_grid), 1)
    return paper_cpu_hours(here, there, wall_seconds, seeds, want_seeds)[1] * grid


def paper_need_line(small: Budget, paper: Budget, wall_seconds: float, seeds: int, command: str) -> str:
    """One sentence for a page not run at the paper budget: the computed need, whether a CPU can run it, the command."""
    base, full = paper_cpu_hours(small, paper, wall_seconds, seeds)
    how = (f"this run's wall time ({wall_seconds / 60:.1f} min, {seeds} seed(s)) × {paper.rounds}/{small.rounds} "
           f"rounds × {paper.clients * paper.fraction:g}/{small.clients * small.fraction:g} (clients × share of "
           f"their data)" + ("" if seeds == 3 else f" × 3/{seeds} seeds"))
    if full != base:
        a, b = model_kind(small), model_kind(paper)
        how += (f" × {full / base:.0f} for the {b} (a training step of the {b} costs {STEP_MS[b]:g} ms on one CPU "
                f"thread, of the {a} {STEP_MS[a]:g} ms)")
    if small.test_size and not paper.test_size:  # evaluation at the paper budget scores more images
        how += (f"; not counted: the small run scored at most {small.test_size} test images per group where the "
                "paper budget scores all of them, while fixed per-round costs weigh less at the paper's scale, "
                "so the figure may be off either way")
    need = (f"about {_hours(full)} on 2 CPU cores: a CPU can run it" if full <= CPU_HOURS_LIMIT
            else f"about {_hours(full)} on 2 CPU cores, more than {CPU_HOURS_LIMIT:g}: it needs a GPU (its GPU "
                 "time was not measured)")
    return f"Paper budget: not run. Computed need: {need} ({how}). Command: `{command}`"


def _hours(h: float) -> str:
    return f"{h * 60:.0f} CPU minutes" if h < 2 else f"{h:.0f} CPU hours"
