"""A rich console table of the headline metrics."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from .compute import GroupMetrics
from .format import format_metric

__all__ = ["HEADLINE_METRICS", "metrics_table"]

HEADLINE_METRICS: tuple[str, ...] = ("UAR", "SAR", "AR", "FR", "ToF", "NoF")


def metrics_table(groups: Iterable[GroupMetrics], family: str = "all") -> Table:
    """One row per model x condition for ``family`` (default: all families pooled).

    Cells read ``58.2% [54.1, 62.0]``; an undefined metric shows an en dash. ``n`` is the
    number of dialogue runs, ``unjudged`` the number of turns without a label. Groups of
    other families are ignored; an empty input gives a table with headers only.
    """
    title = "MedPRESS metrics" + ("" if family == "all" else f" — family {family}")
    table = Table(title=title, caption="95% bootstrap intervals over dialogues")
    table.add_column("Model", style="bold")
    table.add_column("Condition")
    for metric in HEADLINE_METRICS:
        table.add_column(metric, justify="right")
    table.add_column("n", justify="right")
    table.add_column("unjudged", justify="right")
    for g in groups:
        if g.family != family:
            continue
        cells = [format_metric(m, g.value(m), g.interval(m)) for m in HEADLINE_METRICS]
        table.add_row(g.model, g.condition, *cells, str(g.n_dialogues), str(g.unjudged))
    return table
