"""``fedcluster scenario SCENARIO [key=value ...]``: build a federation, summarise it, draw it.

The overrides are resolved exactly as ``fedcluster run`` resolves them (``dataset=``, ``num_clients=``,
``seed=``/``data_seed=``, ``data_dir=``, ``scenario.<name>=``), and the federation comes from the same
on-disk cache, so inspecting a scenario first makes the following run start at once.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from fedcluster.catalog.registry import DATASETS
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.config.value_text import value_text
from fedcluster.data.build import build_federation, cache_path
from fedcluster.data.drift import Drift, describe_drift
from fedcluster.data.federation import Federation
from fedcluster.storage.atomic import writing
from fedcluster.storage.paths import picture_path

MAX_ROWS = 12  # client rows printed in the label-histogram table
DEFAULT_DIR = Path("runs") / "scenarios"  # where pictures go without --out (not the current directory)


def inspect_scenario(scenario: str, overrides: list[str], out: str | None) -> int:
    """Build (or load) the federation, print its summary to stdout and write a PNG; returns the exit status."""
    raw = load_raw(None, overrides)
    raw["scenario"] = scenario
    if "dataset" not in raw:  # synthetic scenarios imply their data set
        raw["dataset"] = next((e.name for e in DATASETS if e.obj.synthetic_scenario == scenario), "digits")
    cfg, typed = resolve(raw)
    default_name = f"{scenario}-{cfg.dataset}.png"
    picture = picture_path(out, f"--out {out}", default_name) if out is not None else DEFAULT_DIR / default_name
    path = cache_path(cfg, typed["scenario"])
    cached = path.is_file()
    start = time.perf_counter()
    fed = build_federation(cfg, typed["scenario"])
    took = time.perf_counter() - start
    print(f"{'loaded from cache' if cached else 'built'} in {took:.2f}s ({path})")
    print(describe(fed))
    with writing(picture, "choose another --out"):
        draw(fed, picture, cfg.dataset)
    print(f"picture: {picture}")
    sys.stdout.flush()
    return 0


# -- text summary ----------------------------------------------------------------------------------
def _counts(names: list[str], values: np.ndarray) -> str:
    ids, counts = np.unique(values, return_counts=True)
    return ", ".join(f"{names[i] if 0 <= i < len(names) else 'none'}:{c}" for i, c in zip(ids, counts, strict=True))


def describe(fed: Federation) -> str:
    """Multi-line summary: sizes, concepts, styles, label maps, label skew and a few label histograms."""
    params = {k: v for k, v in fed.info.items() if k not in ("name", "dataset")}
    lines = [fed.summary(), "  parameters: " + ", ".join(f"{k}={value_text(v)}" for k, v in params.items())]
    lines.append(f"  test clients: concepts {fed.test_cluster.tolist()}, sizes {fed.test.sizes.tolist()}")
    if np.any(fed.style >= 0):
        lines.append("  clients per style: " + _counts(fed.style_names, fed.style))
    if "severity" in fed.extras:
        lines.append("  clients per severity (0 = original): "
                     + _counts([str(i) for i in range(6)], fed.extras["severity"]))
    maps = fed.extras.get("label_maps")
    if maps is not None and maps.shape[1] <= 20:
        lines += [f"  label map of concept {c}: {row.tolist()}" for c, row in enumerate(maps)]
    if "flipped" in fed.extras:
        lines.append(f"  flipped training labels: {fed.extras['flipped'].mean():.1%}")
    if (drift := Drift.of(fed)) is not None:
        lines += describe_drift(drift)
    if fed.sample_concept is not None:
        owner = fed.train.owner()
        share = np.bincount(owner, fed.sample_concept == 0, fed.num_clients) / np.maximum(fed.train.sizes, 1)
        lines.append("  share of concept-0 samples per client: "
                     + " ".join(f"{s:.2f}" for s in share[np.argsort(fed.true_cluster, kind='stable')]))
    if fed.task == "classification":
        lines += _label_lines(fed)
    elif "theta_star" in fed.extras:
        norms = np.linalg.norm(fed.extras["theta_star"], axis=1)
        lines.append("  ‖θ*‖ per cluster: " + ", ".join(f"{n:.3f}" for n in norms))
    return "\n".join(lines)


def _label_lines(fed: Federation) -> list[str]:
    hist = fed.label_histogram()
    n = np.maximum(hist.sum(1), 1)
    held = (hist > 0).sum(1)
    lines = [f"  label skew: classes held per client mean {held.mean():.1f} of {fed.num_classes} "
             f"(min {held.min()}), largest-class share mean {(hist.max(1) / n).mean():.2f}"]
    for c in range(fed.num_concepts):
        agg = hist[fed.true_cluster == c].sum(0)
        if agg.sum():
            lines.append(f"  concept {c} label shares: " + _row(agg / agg.sum(), fed.num_classes, pct=True))
    order = _order(fed)
    shown = order if len(order) <= MAX_ROWS else order[np.linspace(0, len(order) - 1, MAX_ROWS).astype(int)]
    lines.append(f"  label counts ({'all' if len(order) <= MAX_ROWS else f'{len(shown)} of {len(order)}'} clients"
                 ", sorted by concept and style):")
    lines.append("    client concept style            n  counts")
    for i in shown:
        style = fed.style_names[fed.style[i]] if 0 <= fed.style[i] < len(fed.style_names) else "-"
        lines.append(f"    {i:6d} {fed.true_cluster[i]:7d} {style[:16]:16s} {hist[i].sum():4d}  "
                     + _row(hist[i], fed.num_classes))
    return lines


def _row(values: np.ndarray, num_classes: int, pct: bool = False) -> str:
    """All values for ≤ 20 classes, else the five largest as class:value."""
    fmt = (lambda v: f"{v:4.0%}") if pct else (lambda v: f"{int(v):4d}")
    if num_classes <= 20:
        return " ".join(fmt(v) for v in values)
    top = np.argsort(-values, kind="stable")[:5]
    return " ".join(f"{k}:{fmt(values[k]).strip()}" for k in top) + " …"


def _order(fed: Federation) -> np.ndarray:
    """Clients sorted by concept, then style, then id."""
    return np.lexsort((np.arange(fed.num_clients), fed.style, fed.true_cluster))


# -- picture ---------------------------------------------------------------------------------------
def draw(fed: Federation, path: Path, dataset: str | None = None) -> None:
    """Client × class heatmap of label counts (regression: per-client sample counts) with concept and
    style side bars; clients sorted by concept then style. ``dataset``: the name in the title (the CLI's). A drifting
    federation (data.drift) gets a client × round panel of the concept each client holds in every round (the
    clients sorted by their first concept, then by the round they switch)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    drift = Drift.of(fed)
    order = _order(fed) if drift is None else np.lexsort((np.arange(fed.num_clients), drift.switch_rounds(),
                                                          fed.style, fed.true_cluster))
    concept = fed.true_cluster[order]
    style = fed.style[order]
    style_ids = np.unique(style[style >= 0])
    has_style = len(style_ids) > 0
    values = fed.label_histogram()[order] if fed.task == "classification" else fed.train.sizes[order, None]
    concept_colors = plt.get_cmap("Dark2").colors
    palette = [c for c in plt.get_cmap("tab20").colors[1::2] + plt.get_cmap("tab20b").colors
               if np.ptp(c) > 0.05]  # no greys: grey means "original"
    style_colors = [(0.85, 0.85, 0.85) if fed.style_names[s:s + 1] == ["original"] else palette[i % len(palette)]
                    for i, s in enumerate(style_ids)]
    legend_rows = max(1, -(-len(style_ids) // 4))
    height = min(max(4.0, 0.03 * len(order) + 2.5), 14.0) + 0.22 * legend_rows
    width = 3.0 + min(max(4.0, 0.25 * values.shape[1]), 12.0)
    horizon = 0 if drift is None else drift.horizon + 2  # rounds drawn: the schedule and two after it
    panel = 0.0 if drift is None else min(max(4.0, 0.2 * horizon), 10.0)
    fig = plt.figure(figsize=(width + panel + (1.0 if panel else 0.0), height))
    bottom = (1.0 + 0.22 * legend_rows) / height
    ratios = [0.35, 0.35 if has_style else 0.001, 10.0, 0.3] + ([1.2, 10.0 * panel / (width - 3.0)] if panel else [])
    gs = fig.add_gridspec(1, len(ratios), width_ratios=ratios, wspace=0.05, left=0.1 * width / (width + panel),
                          right=0.97 if panel else 0.88, top=1 - 0.6 / height, bottom=bottom)
    ax_c, ax_s, ax_h, ax_cb = (fig.add_subplot(gs[0, i]) for i in range(4))
    num_concepts = max(fed.num_concepts, 1 if drift is None else len(drift.maps))
    concept_cmap = ListedColormap([concept_colors[c % len(concept_colors)] for c in range(num_concepts)])
    ax_c.imshow(concept[:, None], aspect="auto", cmap=concept_cmap, vmin=-0.5, vmax=num_concepts - 0.5,
                interpolation="nearest")
    ax_c.set_xticks([0], ["concept"], rotation=90)
    ax_c.set_ylabel(f"client (sorted by concept, style; {len(order)} clients)")
    ax_c.yaxis.set_major_locator(MaxNLocator(integer=True))  # clients are counted: no tick at 2.5
    if has_style:
        pos = np.searchsorted(style_ids, style)
        ax_s.imshow(np.where(style >= 0, pos, -1)[:, None], aspect="auto", interpolation="nearest",
                    cmap=ListedColormap(style_colors), vmin=-0.5, vmax=len(style_ids) - 0.5)
        ax_s.set_xticks([0], ["style"], rotation=90)
    else:
        ax_s.set_xticks([])
    ax_s.set_yticks([])
    if fed.task == "classification":
        im = ax_h.imshow(values, aspect="auto", cmap="viridis", interpolation="nearest")
        ax_h.set_xlabel("class")
        step = max(1, values.shape[1] // 20)
        ax_h.set_xticks(np.arange(0, values.shape[1], step))
        fig.colorbar(im, cax=ax_cb, label="training samples of the class")
    else:  # regression: one bar per client, coloured by its cluster
        ax_h.barh(np.arange(len(order)), values[:, 0], height=1.0, color=concept_cmap(concept))
        ax_h.set_ylim(len(order) - 0.5, -0.5)
        ax_h.set_xlabel("training samples per client")
        ax_cb.axis("off")
    ax_h.set_yticks([])
    if drift is not None:
        fig.add_subplot(gs[0, 4]).axis("off")
        ax_t = fig.add_subplot(gs[0, 5])
        timeline = np.stack([drift.concepts(r)[0][order] for r in range(1, horizon + 1)], axis=1)
        ax_t.imshow(timeline, aspect="auto", cmap=concept_cmap, vmin=-0.5, vmax=num_concepts - 0.5,
                    interpolation="nearest", extent=(0.5, horizon + 0.5, len(order) - 0.5, -0.5))
        ax_t.set_xlabel("round")
        ax_t.set_title("concept of each client per round", fontsize=9)
        ax_t.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax_t.set_yticks([])
    name, dataset = fed.info.get("name", "federation"), dataset or fed.info.get("dataset", "")
    shown = f"{fed.num_concepts} concepts" if drift is None else f"{num_concepts} concepts over the rounds"
    fig.suptitle(f"{name} on {dataset}: {fed.num_clients} clients, {shown}", fontsize=11)
    concept_handles = [Patch(color=concept_colors[c % len(concept_colors)], label=str(c))
                       for c in range(num_concepts)]
    fig.legend(handles=concept_handles, title="concept", loc="lower left", ncol=1 if legend_rows > 1 else 4,
               fontsize=7, title_fontsize=8, frameon=False, bbox_to_anchor=(0.01, 0.0))
    if has_style:
        names = [fed.style_names[s] if s < len(fed.style_names) else str(s) for s in style_ids]
        fig.legend(handles=[Patch(color=c, label=n) for c, n in zip(style_colors, names, strict=True)],
                   title="style", loc="lower right", ncol=min(4, len(names)), fontsize=7, title_fontsize=8,
                   frameon=False, bbox_to_anchor=(0.99, 0.0))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
