"""A rich console table of the headline metrics."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from .compute import GroupMetrics
from .format import format_metric

__all__ = ["HEADLINE_METRICS", "fit_metrics_table", "metrics_table"]

HEADLINE_METRICS: tuple[str, ...] = ("UAR", "SAR", "AR", "FR", "ToF", "NoF")


def metrics_table(
    groups: Iterable[GroupMetrics], family: str = "all", *, intervals: bool = True
) -> Table:
    """One row per model x condition for ``family`` (default: all families pooled).

    Cells read ``58.2% [54.1, 62.0]`` (``58.2%`` without ``intervals``); an undefined metric
    shows an en dash. ``n`` is the number of dialogue runs, ``unjudged`` the number of turns
    without a label. Model and condition names are never cut or wrapped: a narrow terminal
    squeezes the metric columns instead. Groups of other families are ignored; an empty input
    gives a table with headers only.
    """
    chosen = [g for g in groups if g.family == family]
    title = "MedPRESS metrics" + ("" if family == "all" else f" — family {family}")
    caption = ("95% bootstrap intervals over dialogues" if intervals else
               "intervals left out to fit the terminal; widen it or use --json")
    table = Table(title=title, caption=caption)
    for header, names in (("Model", [g.model for g in chosen]),
                          ("Condition", [g.condition for g in chosen])):
        table.add_column(header, style="bold" if header == "Model" else None, no_wrap=True,
                         min_width=max([len(header), *map(len, names)]))
    for metric in HEADLINE_METRICS:
        table.add_column(metric, justify="right")
    table.add_column("n", justify="right")
    table.add_column("unjudged", justify="right")
    for g in chosen:
        cells = [format_metric(m, g.value(m), g.interval(m) if intervals else None)
                 for m in HEADLINE_METRICS]
        table.add_row(g.model, g.condition, *cells, str(g.n_dialogues), str(g.unjudged))
    return table


def fit_metrics_table(groups: Iterable[GroupMetrics], width: int, family: str = "all") -> Table:
    """`metrics_table` with intervals when it fits in ``width`` columns, else without them."""
    groups = list(groups)
    table = metrics_table(groups, family)
    if Console(width=10_000).measure(table).maximum <= width:
        return table
    return metrics_table(groups, family, intervals=False)
