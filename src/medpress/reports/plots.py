"""Report figures (PNG), drawn for print: large fonts, labelled axes, colour-blind-safe colours.

Every function takes the groups of `compute_groups` and writes one PNG. Conditions are told
apart by colour (Okabe-Ito palette) *and* by marker/line style, so figures survive greyscale.
Figures are built with `matplotlib.figure.Figure`, which renders with Agg and leaves pyplot's
global state alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from medpress.metrics import FAILURE_MODES, GroupMetrics

__all__ = [
    "OKABE_ITO",
    "plot_failure_modes",
    "plot_family_bars",
    "plot_heatmap",
    "plot_survival",
    "plot_uar_by_turn",
]

OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#000000",  # black
    "#F0E442",  # yellow (last: weak on white)
)
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINESTYLES = ("-", "--", "-.", ":")
_HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")

_RC: dict[Any, Any] = {
    "font.size": 14,
    "axes.titlesize": 16,
    "axes.labelsize": 15,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "legend.fontsize": 13,
    "figure.titlesize": 18,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.dpi": 110,
    "savefig.bbox": "tight",
}
_HEATMAP_RC: dict[Any, Any] = {**_RC, "axes.grid": False}
_PANEL_W, _PANEL_H = 6.4, 4.6


def _models(groups: Sequence[GroupMetrics]) -> list[str]:
    return sorted({g.model for g in groups})


def _conditions(groups: Sequence[GroupMetrics]) -> list[str]:
    return sorted({g.condition for g in groups})


def _pooled(groups: Sequence[GroupMetrics]) -> dict[tuple[str, str], GroupMetrics]:
    return {(g.model, g.condition): g for g in groups if g.family == "all"}


def _style(i: int) -> dict[str, Any]:
    return {
        "color": OKABE_ITO[i % len(OKABE_ITO)],
        "marker": _MARKERS[i % len(_MARKERS)],
        "linestyle": _LINESTYLES[i % len(_LINESTYLES)],
    }


def _panels(
    n: int, title: str, *, width: float = _PANEL_W, height: float = _PANEL_H
) -> tuple[Figure, list[Axes]]:
    """One panel per model, at most three a row; unused panels are hidden."""
    ncols = min(3, max(n, 1))
    nrows = math.ceil(max(n, 1) / ncols)
    fig = Figure(figsize=(width * ncols, height * nrows + 0.9), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontweight="bold")
    return fig, axes[: max(n, 1)]


def _legend_below(fig: Figure, axes: Sequence[Axes], ncols: int) -> None:
    handles, labels = axes[0].get_legend_handles_labels()
    if len(axes) == 1:
        ncols = min(ncols, 2)  # a single panel is too narrow for one long row
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False)


def _percent_axis(ax: Axes) -> None:
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, facecolor="white")
    return path


def _nan(values: Sequence[float | None]) -> np.ndarray[Any, np.dtype[np.float64]]:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def plot_uar_by_turn(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """UAR@t, one line per condition with its 95% CI band, one panel per model."""
    pooled, models, conds = _pooled(groups), _models(groups), _conditions(groups)
    with mpl.rc_context(_RC):
        fig, axes = _panels(len(models), "Unsafe answer rate by turn (95% CI bands)")
        for ax, model in zip(axes, models, strict=False):
            t_max = 1
            for i, cond in enumerate(conds):
                g = pooled.get((model, cond))
                if g is None:
                    continue
                turns = np.arange(1, len(g.UAR_at) + 1)
                t_max = max(t_max, len(turns))
                st = _style(i)
                ax.plot(turns, _nan(g.UAR_at), label=cond, linewidth=2.4, markersize=8, **st)
                bands = [g.interval_at("UAR_at", t) for t in range(1, len(turns) + 1)]
                lo = _nan([None if b is None else b[0] for b in bands])
                hi = _nan([None if b is None else b[1] for b in bands])
                ax.fill_between(turns, lo, hi, color=st["color"], alpha=0.15, linewidth=0)
            ax.set_title(model)
            ax.set_xlabel("Turn")
            ax.set_ylabel("UAR (share UNSAFE)")
            ax.set_xticks(range(1, t_max + 1))
            _percent_axis(ax)
        _legend_below(fig, axes, len(conds))
        return _save(fig, path)


def plot_survival(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """Share of dialogues with no UNSAFE reply up to and including turn t (ToF >= t, ToF
    counting turns held); t = 0 is 100% by definition."""
    pooled, models, conds = _pooled(groups), _models(groups), _conditions(groups)
    with mpl.rc_context(_RC):
        fig, axes = _panels(len(models), "Dialogues not yet failed (share with ToF ≥ t)")
        for ax, model in zip(axes, models, strict=False):
            t_max = 1
            for i, cond in enumerate(conds):
                g = pooled.get((model, cond))
                if g is None or not g.survival:
                    continue
                turns = np.arange(0, len(g.survival) + 1)
                t_max = max(t_max, len(g.survival))
                st = _style(i)
                ax.step(
                    turns,
                    _nan([1.0, *g.survival]),
                    where="post",
                    label=cond,
                    linewidth=2.4,
                    color=st["color"],
                    linestyle=st["linestyle"],
                )
                ax.plot(
                    turns,
                    _nan([1.0, *g.survival]),
                    linestyle="none",
                    markersize=7,
                    color=st["color"],
                    marker=st["marker"],
                )
            ax.set_title(model)
            ax.set_xlabel("Turn t")
            ax.set_ylabel("Still safe after turn t")
            ax.set_xticks(range(0, t_max + 1))
            _percent_axis(ax)
        _legend_below(fig, axes, len(conds))
        return _save(fig, path)


def plot_family_bars(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """UAR per family, bars grouped by family and coloured by condition, 95% CI error bars."""
    models, conds = _models(groups), _conditions(groups)
    families = sorted({g.family for g in groups if g.family != "all"})
    by_key = {(g.model, g.condition, g.family): g for g in groups}
    width = 0.8 / max(len(conds), 1)
    with mpl.rc_context(_RC):
        fig, axes = _panels(
            len(models),
            "Unsafe answer rate by family (95% CI)",
            width=max(_PANEL_W, 1.0 + 0.5 * len(families) * len(conds)),
        )
        x = np.arange(len(families))
        for ax, model in zip(axes, models, strict=False):
            for i, cond in enumerate(conds):
                vals, err_lo, err_hi = [], [], []
                for fam in families:
                    g = by_key.get((model, cond, fam))
                    v = None if g is None else g.UAR
                    iv = None if g is None else g.interval("UAR")
                    vals.append(np.nan if v is None else v)
                    err_lo.append(0.0 if v is None or iv is None else max(v - iv[0], 0.0))
                    err_hi.append(0.0 if v is None or iv is None else max(iv[1] - v, 0.0))
                ax.bar(
                    x + (i - (len(conds) - 1) / 2) * width,
                    vals,
                    width * 0.95,
                    yerr=[err_lo, err_hi],
                    capsize=4,
                    label=cond,
                    color=OKABE_ITO[i % len(OKABE_ITO)],
                    hatch=_HATCHES[i % len(_HATCHES)],
                    edgecolor="black",
                    linewidth=0.6,
                    error_kw={"elinewidth": 1.5},
                )
            ax.set_title(model)
            ax.set_xticks(x, [f.replace("_", "\n") for f in families])
            ax.set_ylabel("UAR (share UNSAFE)")
            ax.set_xlabel("Family")
            ax.grid(axis="x", visible=False)
            _percent_axis(ax)
        _legend_below(fig, axes, len(conds))
        return _save(fig, path)


def plot_failure_modes(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """Counts of each failure mode (UNSAFE/AMBIGUOUS turns), horizontal bars by condition."""
    pooled, models, conds = _pooled(groups), _models(groups), _conditions(groups)
    height = 0.8 / max(len(conds), 1)
    with mpl.rc_context(_RC):
        fig, axes = _panels(
            len(models),
            "Failure modes of UNSAFE and AMBIGUOUS replies",
            width=7.5,
            height=max(_PANEL_H, 0.28 * len(FAILURE_MODES) * len(conds) + 1.5),
        )
        y = np.arange(len(FAILURE_MODES))
        for ax, model in zip(axes, models, strict=False):
            for i, cond in enumerate(conds):
                g = pooled.get((model, cond))
                counts = [0 if g is None else g.failure_modes.get(m, 0) for m in FAILURE_MODES]
                ax.barh(
                    y + (i - (len(conds) - 1) / 2) * height,
                    counts,
                    height * 0.95,
                    label=cond,
                    color=OKABE_ITO[i % len(OKABE_ITO)],
                    hatch=_HATCHES[i % len(_HATCHES)],
                    edgecolor="black",
                    linewidth=0.6,
                )
            ax.set_yticks(y, [m.replace("_", " ") for m in FAILURE_MODES])
            ax.invert_yaxis()  # first mode on top, in the published order
            ax.set_title(model)
            ax.set_xlabel("Replies (count)")
            ax.grid(axis="y", visible=False)
        _legend_below(fig, axes, min(len(conds), 4))
        return _save(fig, path)


def plot_heatmap(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """UAR@t for every model-condition (rows) and turn (columns), annotated in percent.

    Uses the perceptually uniform, colour-blind-safe ``cividis`` map; blank cells have no
    judged turn.
    """
    pooled = sorted(_pooled(groups).items())
    t_max = max((len(g.UAR_at) for _, g in pooled), default=1)
    data = np.full((len(pooled), t_max), np.nan)
    for r, (_, g) in enumerate(pooled):
        data[r, : len(g.UAR_at)] = _nan(g.UAR_at)
    with mpl.rc_context(_HEATMAP_RC):
        fig = Figure(figsize=(3.2 + 1.25 * t_max, 1.6 + 0.5 * len(pooled)), layout="constrained")
        ax = fig.subplots()
        image = ax.imshow(data, cmap="cividis", vmin=0.0, vmax=1.0, aspect="auto")
        cmap = image.get_cmap()
        for (r, c), v in np.ndenumerate(data):
            if not np.isnan(v):
                red, green, blue, _ = cmap(v)
                # Dark text on light cells and vice versa (relative luminance).
                light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
                ax.text(
                    c,
                    r,
                    f"{100 * v:.0f}%",
                    ha="center",
                    va="center",
                    fontsize=12,
                    color="black" if light else "white",
                )
        ax.set_xticks(range(t_max), [str(t) for t in range(1, t_max + 1)])
        ax.set_yticks(range(len(pooled)), [f"{m} · {c}" for (m, c), _ in pooled])
        ax.set_xlabel("Turn")
        ax.set_ylabel("Model · condition")
        ax.set_title("Unsafe answer rate by turn", fontweight="bold")
        bar = fig.colorbar(image, ax=ax, format=PercentFormatter(xmax=1.0))
        bar.set_label("UAR")
        return _save(fig, path)
