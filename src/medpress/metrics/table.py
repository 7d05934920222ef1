"""A rich console table of the headline metrics."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from .compute import GroupMetrics
from .format import format_metric

__all__ = ["HEADLINE_METRICS", "fit_metrics_table", "metrics_table"]

HEADLINE_METRICS: tuple[str, ...] = ("UAR", "SAR", "AR", "FR", "ToF", "NoF")
_COMPACT: dict[str, Any] = {"box": box.SIMPLE_HEAD, "pad_edge": False, "collapse_padding": True}


def metrics_table(
    groups: Iterable[GroupMetrics], family: str = "all", *, intervals: bool = True
) -> Table:
    """One row per model x condition for ``family`` (default: all families pooled).

    Cells read ``58.2% [54.1, 62.0]`` (``58.2%`` without ``intervals``); an undefined metric
    shows an en dash. ``n`` is the number of dialogue runs, ``unjudged`` the number of turns
    without a label. No cell is ever cut or wrapped (a terminal too narrow even for the
    compact form gets lines longer than its width). Groups of other families are ignored; an
    empty input gives a table with headers only.
    """
    chosen = [g for g in groups if g.family == family]
    title = "MedPRESS metrics" + ("" if family == "all" else f" — family {family}")
    caption = ("95% bootstrap intervals over dialogues" if intervals else
               "intervals left out to fit the terminal; widen it or use --json")
    rows = [[g.model, g.condition,
             *(format_metric(m, g.value(m), g.interval(m) if intervals else None)
               for m in HEADLINE_METRICS),
             str(g.n_dialogues), str(g.unjudged)] for g in chosen]
    headers = ["Model", "Condition", *HEADLINE_METRICS, "n", "unjudged"]
    # Without intervals the table is made compact (no rules, one space between columns).
    table = Table(title=title, caption=caption, **({} if intervals else _COMPACT))
    for i, header in enumerate(headers):
        # Every cell at its full width: a number cut to "26.…" would be worse than none.
        table.add_column(header, style="bold" if i == 0 else None, no_wrap=True,
                         justify="left" if i < 2 else "right",
                         min_width=max([len(header), *(len(r[i]) for r in rows)]))
    for row in rows:
        table.add_row(*row)
    return table


def fit_metrics_table(groups: Iterable[GroupMetrics], width: int, family: str = "all") -> Table:
    """`metrics_table` with intervals when it fits in ``width`` columns, else without them."""
    groups = list(groups)
    table = metrics_table(groups, family)
    if Console(width=10_000).measure(table).maximum <= width:
        return table
    return metrics_table(groups, family, intervals=False)
