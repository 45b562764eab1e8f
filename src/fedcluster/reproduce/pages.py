"""Markdown of one reproduction (``docs/reproduction/NAME.md`` + figure) and the ``docs/REPRODUCTION.md`` summary."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from fedcluster.errors import UserError
from fedcluster.metrics.statistics import format_mean_sd
from fedcluster.reproduce.cost import CPU_HOURS_LIMIT, budget_cpu_hours, paper_cpu_hours, paper_need_line
from fedcluster.reproduce.estimate import matching, need_line
from fedcluster.reproduce.experiments import EXPERIMENTS, UNAVAILABLE
from fedcluster.reproduce.papers import CITATIONS, citation_lines
from fedcluster.reproduce.results import Stored
from fedcluster.reproduce.spec import BUDGET_RANK, Experiment

SUMMARY = "REPRODUCTION.md"


def command(exp: Experiment, budget: str = "small", seeds: int = 3, device: str = "", extra: list[str] = ()) -> str:
    parts = ["fedcluster reproduce", exp.name, f"--budget {budget}", f"--seeds {seeds}"]
    parts += [f"--device {device}"] if device and device != "cpu" else []
    parts += [f"--set {e}" for e in extra]
    return " ".join(parts)


def budget_label(exp: Experiment, stored: Stored) -> str:
    """The stored budget's name, "paper" where the experiment's budget is the paper's itself (e.g. a paper's own
    small population: its small and paper budgets are the same)."""
    same = stored.budget in exp.budgets and exp.budgets[stored.budget] == exp.budgets["paper"]
    return "paper" if same else stored.budget


def verdict(exp: Experiment, stored: Stored) -> tuple[str, str]:
    if not stored.finished:
        expected = stored.seeds * len(exp.pairs())
        have = sum(r["seed"] < stored.seeds for r in stored.records)
        return "incomplete", (f"{have} of {expected} runs recorded (cells average the seeds recorded "
                              "so far); the same command continues where it stopped")
    return exp.judge(stored.results(), stored.budget)


def table(exp: Experiment, stored: Stored) -> list[str]:
    res = stored.results()
    settings = [s for s in exp.settings if any((s.name, m.label) in res for m in exp.methods)]
    head = (["setting"] if len(exp.settings) > 1 else []) + ["method"]
    for m in exp.metrics:
        head += [f"{m.header} (ours)", f"{m.header} (paper)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in settings:
        for m in exp.methods:
            cells = res.get((s.name, m.label))
            if cells is None:
                continue
            row = ([s.name] if len(exp.settings) > 1 else []) + [m.label]
            for metric in exp.metrics:
                row += [format_mean_sd(cells.get(metric.key, []), metric.spec),
                        exp.paper_value(s, m, metric.key) or "–"]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def figure(exp: Experiment, stored: Stored, path: Path) -> Path | None:
    """Mean over seeds of ``exp.curve`` per method, one panel per setting (at most 6)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[str, dict[str, dict[float, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in stored.records:
        if r["seed"] < stored.seeds:
            for t, v in r["curve"]:
                curves[r["setting"]][r["method"]][t].append(v)
    names = [s.name for s in exp.settings if s.name in curves]
    if not names:
        return None
    names = names[:: max(1, math.ceil(len(names) / 6))][:6]
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        for method, pts in curves[name].items():
            ts = sorted(pts)
            ax.plot(ts, [sum(pts[t]) / len(pts[t]) for t in ts], label=method)
        if exp.curve == "param_error":
            ax.set_yscale("log")
        ax.set(xlabel="round", ylabel=exp.curve, title=name or exp.name)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{exp.name}: mean over {stored.seeds} seed(s)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def diverged_runs(stored: Stored) -> list[str]:
    """The runs that diverged (recorded with NaN metrics, so the means above leave them out)."""
    bad = [r for r in stored.records if r.get("diverged") and r["seed"] < stored.seeds]
    return (["", "Diverged runs (left out of the means above):", ""]
            + [f"- {r['method']}{' at ' + r['setting'] if r['setting'] else ''}, seed {r['seed']}: {r['diverged']}"
               for r in bad]) if bad else []


def write_page(path: Path, text: str) -> None:
    """Write a generated page; a folder or other non-file in its place is refused in one line (exit 2)."""
    if path.exists() and not path.is_file():
        raise UserError(f"{path} is not a file (a folder or a device?): move it away, then run the same command again")
    try:
        path.write_text(text)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror}; check the folder's permissions and free space") from None


def reading(out: Path, name: str) -> list[str]:
    """The hand-written reading of the recorded results (``NAME.reading.md`` beside the page), if any: what the
    numbers say and why, which no automatic check can write."""
    path = out / f"{name}.reading.md"
    return path.read_text().strip().splitlines() if path.is_file() else []


def paper_budget_line(exp: Experiment, stored: Stored, out: Path) -> list[str]:
    """Where the paper budget was not run: what it needs (measured with ``--estimate`` when ``out`` holds a
    current estimate, else computed from this run) and the command that runs it."""
    if budget_label(exp, stored) == "paper":
        return []
    small, paper = exp.budget(stored.budget), exp.budgets["paper"]
    measured = matching(out / f"{exp.name}.estimate.json", exp, "paper")
    hours = measured.cpu_hours() if measured else paper_cpu_hours(small, paper, stored.wall_seconds, stored.seeds)[1]
    extra = [e for e in stored.extra if not e.startswith("threads=")]
    cmd = command(exp, "paper", max(stored.seeds, 3), "" if hours <= CPU_HOURS_LIMIT else "cuda", extra)
    if measured:
        return [need_line(measured, cmd + " --publish", CPU_HOURS_LIMIT), ""]
    return [paper_need_line(small, paper, stored.wall_seconds, stored.seeds, cmd + " --publish"), ""]


def runs_line(stored: Stored) -> list[str]:
    """Which runs the page was judged from: the run store's keys (in the records) and the records older than it."""
    used = [r for r in stored.records if r["seed"] < stored.seeds]
    keyed = sum(1 for r in used if r.get("run"))
    if not used:
        return []
    text = (f"Judged from {keyed} stored run(s): each record in [`{stored.name}.json`]({stored.name}.json) names its "
            "run's key, kept as `store/KEY[:2]/KEY.json` in the run store." if keyed else "")
    if keyed < len(used):
        text += (" " if text else "") + (f"{len(used) - keyed} record(s) predate the run store: their runs were not "
                                         "kept, only the figures read from them.")
    return ["", text]


def write_experiment(exp: Experiment, stored: Stored, out: Path) -> Path:
    budget = exp.budget(stored.budget)
    paper = exp.budgets["paper"]
    status, why = verdict(exp, stored)
    fig = figure(exp, stored, out / f"{exp.name}.png")
    notes = reading(out, exp.name)
    papers = citation_lines(exp.title, exp.source, exp.claim, *exp.differences, budget.note, paper.note, *notes)
    lines = [f"# {exp.name}: {exp.title}", "", f"- **Source:** {exp.source}", f"- **Claim:** {exp.claim}",
             f"- **Verdict at this budget:** {status} — {why}", "", "Papers:", "", *papers, "",
             "Generated by `fedcluster reproduce`; per-seed numbers in "
             f"[`{exp.name}.json`]({exp.name}.json). Ours: mean ± sample sd over {stored.seeds} seed(s) "
             "(0 … seeds − 1); \"(n/N seeds)\" = only n seeds have a value (e.g. reached ARI 1).", "",
             "## Command", "", "```", command(exp, stored.budget, stored.seeds, stored.device, stored.extra), "```", "",
             "## Budget", "", "| | this run | paper budget |", "|---|---|---|",
             f"| budget | {budget_label(exp, stored)} | paper |", f"| clients | {budget.clients} | {paper.clients} |",
             f"| rounds | {budget.rounds} | {paper.rounds} |", f"| model | {budget.model} | {paper.model} |",
             f"| share of client data | {budget.fraction:g} | {paper.fraction:g} |",
             f"| test images per test client | {budget.test_size or 'all'} | {paper.test_size or 'all'} |",
             f"| device | {stored.device} | — |", f"| seeds | {stored.seeds} | — |",
             f"| wall time, all runs recorded | {stored.wall_seconds / 60:.1f} min ({stored.date}) | — |", "",
             *paper_budget_line(exp, stored, out), "## Results", "", *table(exp, stored), *diverged_runs(stored),
             *runs_line(stored), ""]
    if notes:
        lines += ["## Reading", "", f"Written by hand after the run (`{exp.name}.reading.md`).", "", *notes, ""]
    earlier = sorted(p.name for p in out.glob(f"{exp.name}.*.reading.md"))
    if earlier:
        lines += ["Readings written of earlier results at another budget (their numbers are not these) are kept "
                  "beside this page: " + ", ".join(f"`{n}`" for n in earlier) + ".", ""]
    lines += ["## Differences from the paper", ""]
    lines += [f"- {d}" for d in (*exp.differences, budget.note) if d]
    if fig is not None:
        lines += ["", "## Figure", "", f"![{exp.curve} per round]({fig.name})"]
    path = out / f"{exp.name}.md"
    write_page(path, "\n".join(lines) + "\n")
    return path


def next_budget(exp: Experiment, stored: Stored | None) -> str | None:
    """The budget that would settle ``exp`` further: protocol where it has one and the records are below it, else
    paper; None at the paper budget."""
    held = BUDGET_RANK.get(stored.budget, 0) if stored is not None else 0
    if held >= BUDGET_RANK["paper"]:
        return None
    return "protocol" if "protocol" in exp.budgets and held < BUDGET_RANK["protocol"] else "paper"


def settle_cell(exp: Experiment, stored: Stored | None, out: Path) -> str:
    """What the next budget needs, for 3 seeds: measured by ``--estimate`` when a current estimate is stored,
    else computed from the stored run's wall time (sizes, rounds, learning-rate grid and model scaled)."""
    target = next_budget(exp, stored)
    if stored is not None and stored.stale(exp.trimmed(stored.budget).protocol(stored.budget)):
        target = stored.budget  # its own budget again, under the protocol it now has
    elif target is None:
        return "settled at the paper budget"
    measured = matching(out / f"{exp.name}.estimate.json", exp, target)
    if measured is not None:
        hours, how = measured.cpu_hours(3), "measured"
    elif stored is not None and stored.wall_seconds > 0 and stored.budget in exp.budgets:
        hours = budget_cpu_hours(exp.budget(stored.budget), exp.budget(target), stored.wall_seconds, stored.seeds)
        how = "computed"
    else:
        return f"{target} budget: not yet measured (`--budget {target} --estimate`)"
    where = "a CPU can run it" if hours <= CPU_HOURS_LIMIT else "needs a GPU"
    return f"{target} budget: about {hours:.1f} CPU hours, {how} ({where})"


def write_summary(out: Path, views: dict[str, Stored] | None = None) -> Path:
    """``REPRODUCTION.md`` beside ``out`` from every experiment's stored results; missing ones are "not yet run".

    ``views``: results to show instead of the stored file's (``--report-only --seeds N``: the complete seeds)."""
    groups: dict[str, list[str]] = defaultdict(list)
    rows = ["| experiment | source | claim | status | budget, seeds | to settle it | why / how to run |",
            "|---|---|---|---|---|---|---|"]
    for exp in EXPERIMENTS.values():
        stored = (views or {}).get(exp.name) or Stored.load(out / f"{exp.name}.json")
        if stored is None:
            status, why, run = "not yet run", f"`{command(exp)}`", "–"
        elif stored.stale(exp.trimmed(stored.budget).protocol(stored.budget)):
            status, run = "rerun needed", f"{budget_label(exp, stored)}, {stored.seeds}"
            why = (f"its records were run with other settings than the experiment now names (its page describes "
                   f"them); rerun: `fedcluster reproduce {exp.name} --budget {stored.budget} --seeds "
                   f"{stored.seeds} --fresh --publish` ([details]({out.name}/{exp.name}.md))")
        else:
            status, why = verdict(exp, stored)
            run = f"{budget_label(exp, stored)}, {stored.seeds}"
            why = f"{why} ([details]({out.name}/{exp.name}.md))"
        groups[f"{status} (open questions)" if exp.open_question else status].append(exp.name)
        cells = (exp.name, exp.source, exp.claim, f"**{status}**", run, settle_cell(exp, stored, out), why)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    for item in UNAVAILABLE.values():
        groups["cannot run here"].append(item.name)
        cells = (item.name, item.source, item.claim, "**cannot run here**", "–", "–", item.needs)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(groups.items()))
    text = ["# Reproduction: the papers' headline claims, paper vs ours", "",
            f"Generated by `fedcluster reproduce` from `{out.name}/*.json`; do not edit by hand. "
            "`fedcluster reproduce --list` names every experiment; `fedcluster reproduce NAME --budget small` runs "
            "one at a smaller budget (each page gives the wall time it took), `--budget paper` at the paper's "
            "clients, rounds and batch, `--budget protocol` (the FedRC and HCFL papers' entries) at the paper's "
            "training protocol (clients, rounds, batch, local steps, corruptions, learning-rate grid) with a model a "
            "CPU runs in hours; each page not run at the paper budget says what that budget needs, computed "
            "from its own run, and the column \"to settle it\" what the next budget needs for 3 seeds. "
            "`fedcluster reproduce --all --budget protocol --time-limit MIN --workers N` runs every unsettled "
            "entry, cheapest first (over as many seeds as its page holds, if more), and publishes each once its "
            "seeds are in. `--publish` writes these pages "
            "(never from a smaller budget or fewer seeds than they hold) and `--report-only --publish` re-judges "
            "the stored results with the current checks (no run). "
            "A verdict holds only for the budget it was measured at: a small budget is a smaller federation with "
            "fewer rounds, and several experiments use Fashion-MNIST and light models where the papers use "
            "MNIST/CIFAR and MobileNetV2/ResNet18 (each page lists every difference).", "",
            "Each check encodes one of its paper's sentences, in the paper's order (the first is the headline). A "
            "comparison of two methods is paired by seed: it meets its bound when the whole ±2-standard-error "
            "interval of the difference meets it, misses when the whole interval misses it, and ties otherwise. A "
            "check cannot be tested when the run cannot test the claim (e.g. the method never split). A check marked "
            "\"from the paper's table\" adds a number the paper's text does not state: it is shown, and decides "
            "nothing. The status follows every other check:", "",
            "- **holds**: the headline and every other testable check meet their bounds;",
            "- **does not hold**: the headline misses, or some check misses and none meets its bound;",
            "- **partly**: some check misses and another meets its bound; or none misses, the headline meets its "
            "bound and another ties;",
            "- **tie**: no check misses and the headline ties;",
            "- **not tested**: no check misses and the headline cannot be tested;",
            "- **rerun needed**: the experiment's settings changed since its records were run (a fix of its "
            "protocol): its page still describes the runs made, and no verdict is drawn from them.", "",
            "So a clear miss anywhere is never hidden behind a tie on the headline.", "",
            "Papers:", "", *(f"- **{t}:** {c}" for t, c in CITATIONS.items()), "",
            f"Status: {counts}.", "", *rows, ""]
    readings = [(exp.name, reading(out, exp.name)) for exp in EXPERIMENTS.values()]
    if any(notes for _, notes in readings):
        text += ["## What the results say", "",
                 "Hand-written readings of the recorded results (`docs/reproduction/NAME.reading.md`).", ""]
        for name, notes in readings:
            text += [f"### {name}", "", *notes, ""] if notes else []
    path = out.parent / SUMMARY
    write_page(path, "\n".join(text))
    return path
