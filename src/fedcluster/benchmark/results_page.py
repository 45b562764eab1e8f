"""The benchmark's page: the taxonomy, the settings, how to add a method or scenario, then (from the records only,
so that the same records give the same bytes) the "which method for which shift" summary, a method × scenario
heatmap of ranks and one table per scenario. No date or machine appears in it: the wall seconds are the stored
runs' own."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from fedcluster.benchmark.methods import CHOOSE_K, BenchMethod
from fedcluster.benchmark.plan import Benchmark, pair_key
from fedcluster.benchmark.records import Records
from fedcluster.benchmark.table import Cell, cell_of, leaders, mean_ranks, primary, ranks
from fedcluster.benchmark.taxonomy import BenchBudget, Scenario

HEATMAP = "heatmap.png"


def _pm(cell: Cell, key: str, scale: float = 1.0, spec: str = ".1f") -> str:
    mean, se, n = cell.mean_se(key)
    if n == 0:
        return "–"
    text = f"{mean * scale:{spec}}"
    if not math.isnan(se):
        text += f" ± {se * scale:{spec}}"
    return text


def _reach(cell: Cell) -> str:
    """Mean round of ARI ≥ 0.9 over the seeds that reached it, with how many did."""
    mean, _, n = cell.mean_se("to_ari")
    if cell.ok == 0:
        return "–"
    if n == 0:
        return "never"
    return f"{mean:.1f}" + (f" ({n}/{cell.ok})" if n < cell.ok else "")


def _status(cell: Cell) -> str:
    """The seeds' count, and those that gave no numbers."""
    parts = [f"{cell.ok}/{cell.seeds}"]
    for s in ("diverged", "failed", "missing"):
        if cell.status.get(s):
            parts.append(f"{cell.status[s]} {'not run yet' if s == 'missing' else s}")
    return ", ".join(parts)


def cells(exp: Benchmark, records: Records, seeds: int) -> dict[str, dict[str, Cell]]:
    """scenario -> method -> its cell over seeds 0 … seeds − 1."""
    out: dict[str, dict[str, Cell]] = {}
    for setting in exp.settings:
        out[setting.name] = {m.label: cell_of([records.get(pair_key(exp, setting, m), s) for s in range(seeds)],
                                              seeds) for m in exp.methods}
    return out


REFERENCES = frozenset({"oracle"})  # methods given the ground truth: shown in the tables, never ranked


def heatmap(table: dict[str, dict[str, Cell]], tasks: dict[str, str], order: Sequence[str], path: Path) -> None:
    """Methods (rows, best mean rank first) × scenarios (columns), coloured by rank; blank where n/a."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    scen = list(table)
    grid = np.full((len(order), len(scen)), np.nan)
    for j, s in enumerate(scen):
        r = ranks(table[s], tasks[s])
        for i, m in enumerate(order):
            grid[i, j] = r.get(m, np.nan)
    fig, ax = plt.subplots(figsize=(1.1 * len(scen) + 3, 0.32 * len(order) + 1.6))
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(scen)), scen, rotation=35, ha="right")
    ax.set_yticks(range(len(order)), order)
    for i in range(len(order)):
        for j in range(len(scen)):
            text = "n/a" if math.isnan(grid[i, j]) else f"{grid[i, j]:g}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="black" if math.isnan(grid[i, j]) or grid[i, j] > len(order) / 2 else "white")
    fig.colorbar(im, ax=ax, label="rank (1 = best)")
    ax.set_title("rank by global accuracy (regression: test MSE)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def summary_lines(table: dict[str, dict[str, Cell]], tasks: dict[str, str], shifts: dict[str, str],
                  one_concept: frozenset[str] = frozenset()) -> list[str]:
    """One line per scenario naming its leader and those tied with it, read from the numbers; then the best ARI,
    or, where every client shares one concept (``one_concept``: ARI is not defined there), the methods that keep
    one cluster on every seed."""
    lines = []
    for s, row in table.items():
        best, tied = leaders(row, tasks[s])
        key, _ = primary(tasks[s])
        what = "test MSE" if key == "mse" else "global accuracy"
        if best is None:
            lines.append(f"- **{s}** ({shifts[s]}): no results yet.")
            continue
        tie = (f"; within {2:g} standard errors of it: {', '.join(tied)}" if tied
               else "; no other method within 2 standard errors")
        if s in one_concept:
            whole = sorted(m for m, c in row.items() if c.ok and c.values.get("k") and set(c.values["k"]) == {1.0})
            ari = (" One concept, so no ARI: " + (f"{len(whole)} of {sum(1 for c in row.values() if c.ok)} methods "
                                                   f"keep one cluster on every seed" if whole
                                                   else "every method ends with more than one cluster") + ".")
        else:
            ari_best, _ = leaders({m: _as(c, "ari") for m, c in row.items()}, "classification")
            ari = f" Best ARI: {ari_best} ({_pm(row[ari_best], 'ari', spec='.2f')})." if ari_best else ""
        value = _pm(row[best], key, spec=".3g" if key == "mse" else ".1f")
        lines.append(f"- **{s}**: best {what}: **{best}** ({value}){tie}.{ari}")
    return lines


def _as(cell: Cell, key: str) -> Cell:
    """``cell`` with ``key`` in the place of its global accuracy (to rank another figure)."""
    return Cell(cell.seeds, {"global": cell.values.get(key, [])}, cell.status)


def scenario_table(scenario: Scenario, row: dict[str, Cell], methods: dict[str, BenchMethod],
                   choose_k: bool) -> list[str]:
    reg = scenario.task == "regression"
    key, _ = primary(scenario.task)
    order = sorted(row, key=lambda m: (math.isnan(row[m].mean_se(key)[0]),
                                       (1 if reg else -1) * (row[m].mean_se(key)[0] if row[m].ok else 0), m))
    head = (["method", "K given", "test MSE", "estimation error", "ARI", "final K", "rounds to ARI ≥ 0.9",
             "wall s", "kB sent / client / round", "seeds"] if reg else
            ["method", "K given", "global acc. %", "local acc. %", "ARI", "final K", "rounds to ARI ≥ 0.9",
             "wall s", "kB sent / client / round", "seeds"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    na = []
    for m in order:
        cell = row[m]
        if cell.ok == 0 and cell.status.get("n/a"):
            na.append(f"{m} ({cell.reason})")
            continue
        given = methods[m].setting
        if choose_k and methods[m].k_key:
            given = "by validation" + (f" ({', '.join(map(str, sorted(set(cell.k_chosen))))})" if cell.k_chosen
                                       else "")
        first = ([_pm(cell, "mse", spec=".3g"), _pm(cell, "est_error", spec=".3g")] if reg else
                 [_pm(cell, "global"), _pm(cell, "local")])
        ari, reach = ("–", "–") if scenario.one_concept else (_pm(cell, "ari", spec=".2f"), _reach(cell))
        name = f"{m} (reference)" if m in REFERENCES else m
        lines.append("| " + " | ".join([name, given, *first, ari, _pm(cell, "k"),
                                        reach, _pm(cell, "seconds", spec=".1f"),
                                        _pm(cell, "bytes", 1e-3, ".1f"), _status(cell)]) + " |")
    if scenario.one_concept:
        lines += ["", "One concept: the right clustering keeps every client together, ARI is not defined (–), and "
                      "a final K above 1 is a split the data do not call for."]
    if na:
        lines += ["", "n/a (the method refuses this scenario): " + "; ".join(na)]
    failed = [f"{m} ({row[m].reason})" for m in order if row[m].reason and (row[m].status.get("failed")
                                                                             or row[m].status.get("diverged"))]
    if failed:
        lines += ["", "Diverged or failed on some seeds: " + "; ".join(failed)]
    return lines


def page(exp: Benchmark, scenarios: Sequence[Scenario], methods: Sequence[BenchMethod], budget: BenchBudget,
         records: Records, seeds: int, command: str, drift_note: str | None, figure: str | None,
         folder: Path | None) -> str:
    """The whole page (Markdown); the heatmap is drawn into ``folder`` / HEATMAP when there are results."""
    table = cells(exp, records, seeds)
    contest = {s: {m: c for m, c in row.items() if m not in REFERENCES} for s, row in table.items()}
    tasks = {s.name: s.task for s in scenarios}
    shifts = {s.name: s.shift for s in scenarios}
    by_name = {m.name: m for m in methods}
    per = {s: ranks(row, tasks[s]) for s, row in contest.items()}
    mr = mean_ranks(per, [m.name for m in methods if m.name not in REFERENCES])
    missing = {m: sum(m not in r for r in per.values()) for m in mr}  # scenarios it refuses: ranked after
    order = sorted(mr, key=lambda m: (math.isnan(mr[m]), missing[m], mr[m] if not math.isnan(mr[m]) else 0.0, m))
    total = sum(1 for row in table.values() for c in row.values() for _ in range(c.ok))
    cpu = math.fsum(v for row in table.values() for c in row.values() for v in c.values.get("seconds", []))
    out = [*INTRO, "", "## The taxonomy", "",
           "| scenario | shift | registered scenario | its picture |", "|---|---|---|---|"]
    out += [f"| {s.name} | {s.shift} | `{s.scenario}` on {s.dataset} | `{s.picture()}` |" for s in scenarios]
    if drift_note:
        out += ["", f"Concept drift: {drift_note.split(': ', 1)[1]}; the slot fills itself once one is."]
    out += ["", *settings_text(budget, seeds, len(methods), exp.choose_k), "", *EXTEND, "", "## Results", ""]
    recorded = sum(c.seeds - c.status.get("missing", 0) for row in table.values() for c in row.values())
    if recorded == 0:
        out += [f"No results are stored here yet: `{command}` produces them (one table per scenario, the heatmap "
                "of ranks and the summary below are generated from the stored runs)."]
        return "\n".join(out) + "\n"
    expected = seeds * sum(len(row) for row in table.values())
    out += [f"Budget `{budget.name}`, {seeds} seed(s), {len(methods)} methods × {len(scenarios)} scenarios: "
            f"{total} runs with numbers of {expected}, {cpu / 3600:.2f} CPU hours of training as stored. "
            f"Command: `{command}`.", "", "### Which method for which shift", "",
            "Generated from the tables below (mean ± standard error over seeds; tied: within 2 standard errors).",
            "", *summary_lines(contest, tasks, shifts, frozenset(s.name for s in scenarios if s.one_concept))]
    present = sorted(m for m in REFERENCES if m in by_name)
    if present:
        out += ["", f"Ranks, leaders and the heatmap leave out {', '.join(present)}, a reference that is given each "
                "client's true cluster; its row stays in every table."]
    best = [m for m in order if not math.isnan(mr[m]) and not missing[m]][:3]
    if best:
        out += ["", f"Lowest mean rank over the scenarios (of the methods that run every one): "
                    f"{', '.join(f'{m} ({mr[m]:.1f})' for m in best)}; the heatmap lists the methods that refuse "
                    "some scenarios after the others."]
    if folder is not None and figure is not None:
        heatmap(contest, tasks, order, folder / HEATMAP)
        out += ["", f"![rank of every method in every scenario]({figure})"]
    for s in scenarios:
        out += ["", f"### {s.name}", "", s.shift + ".", "", *scenario_table(s, table[s.name], by_name, exp.choose_k)]
    return "\n".join(out) + "\n"


INTRO = [
    "# Benchmark: every method against every kind of shift",
    "",
    "`fedcluster benchmark` runs every registered method on a fixed taxonomy of heterogeneity, each kind of shift a",
    "registered scenario with its ground truth, over seeds, and writes one table per scenario, a method × scenario",
    "heatmap of ranks and a short \"which method for which shift\" summary generated from the numbers. Every",
    "finished run is kept in the run store of the reproduction suite (under a key of everything that decides its",
    "result), so the same command again trains nothing and writes this page byte for byte; a stopped call",
    "(Ctrl-C, `--time-limit`) continues where it stopped.",
    "",
    "```bash",
    "fedcluster benchmark --list                       # the scenarios and methods",
    "fedcluster benchmark --estimate                   # what the default budget needs on this machine",
    "fedcluster benchmark --workers 2 --time-limit 60  # run (or continue) it; the page goes to runs/benchmark/",
    "fedcluster benchmark --methods ifca,fedrc --scenarios rotation,concept-shift --seeds 1",
    "```",
]

EXTEND = [
    "## Your own method or scenario in the table",
    "",
    "A method you register (see [extending fedcluster](extending.md)) joins the table with one flag:",
    "`fedcluster benchmark --plugin mypackage.mymethod` (a module on the Python path, or a `.py` file) imports",
    "it before the benchmark lists the registered methods, in every worker process too. If its parameters",
    "have a `num_clusters` (or `num_groups`) of default above 1, it is given each scenario's true K; otherwise",
    "it runs at its defaults. `--methods +mymethod,-oracle` adds or drops one method, `--methods a,b` keeps",
    "those only. A method that cannot run a scenario should refuse it in one line (raise",
    "`fedcluster.errors.UserError`): the table then marks it n/a with that line.",
    "",
    "A scenario is added to the taxonomy in `fedcluster/benchmark/taxonomy.py` (a registered scenario, its data",
    "set and parameters); a scenario registered under a name starting with `drift-` fills the concept-drift",
    "slot by itself.",
]


def settings_text(budget: BenchBudget, seeds: int, methods: int, choose_k: bool) -> list[str]:
    k_rule = (f"K chosen among {', '.join(map(str, CHOOSE_K))} by the final validation accuracy of the clients "
              "(regression: validation loss), never by the test clients" if choose_k else
              "the scenario's true K (its number of concepts)")
    return [
        "## Settings", "",
        f"- Budget `{budget.name}`: {budget.about}. Every client takes part in every round; one thread a run "
        "unless `--set threads=N`.",
        "- Digits (scikit-learn's 8×8 images) for label skew, concept shift, rotations and label noise; "
        "Fashion-MNIST (Debian's `dataset-fashion-mnist`, or `--set data_dir=DIR`) for the corruption families; "
        "the FedMD paper's generator for the regression.",
        f"- {methods} methods, each at the defaults its documentation gives (`fedcluster list NAME`); the methods "
        f"with a fixed number of clusters at {k_rule}; the methods that find K themselves at their defaults.",
        f"- {seeds} seed(s) (0 … {seeds - 1}); each seed draws its own federation, shared by every method.",
        "- Read at the final round: global accuracy (the new test clients of each concept), local accuracy (each "
        "client's own validation data), ARI of the clustering against the true clusters, the final number of "
        "clusters K, the first round with ARI ≥ 0.9, the run's wall seconds (with `--choose-k`: of every K "
        "tried) and the kilobytes each client sent "
        "a round; the regression scenario gives the test mean squared error and, where the method reports it, "
        "the estimation error of the true parameters (the FedMD paper's min over matchings of the largest "
        "‖θ̂ − θ*‖). Mean ± standard error over the seeds.",
        "- The rank of a method in a scenario is by global accuracy (regression: test MSE); methods with equal "
        "means share a rank.",
    ]
