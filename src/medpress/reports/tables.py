"""Report tables as plain data (headers + rows of strings) for the markdown template."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from medpress.metrics import (
    FAILURE_MODES,
    HEADLINE_METRICS,
    GroupMetrics,
    PairedDiff,
    format_diff,
    format_metric,
    format_value,
)

__all__ = [
    "TableData",
    "failure_mode_table",
    "family_table",
    "headline_table",
    "leaderboard_table",
    "paired_table",
    "uar_by_turn_table",
]


@dataclass(frozen=True, slots=True)
class TableData:
    """A table to render: column headers and rows of already formatted cells."""

    headers: list[str]
    rows: list[list[str]]


def _metric_cells(g: GroupMetrics) -> list[str]:
    return [format_metric(m, g.value(m), g.interval(m)) for m in HEADLINE_METRICS]


def headline_table(groups: Sequence[GroupMetrics]) -> TableData:
    """Model x condition, all families pooled: the six metrics with CIs, n and unjudged."""
    rows = [
        [g.model, g.condition, *_metric_cells(g), str(g.n_dialogues), str(g.unjudged)]
        for g in groups
        if g.family == "all"
    ]
    return TableData(["Model", "Condition", *HEADLINE_METRICS, "n", "Unjudged"], rows)


def family_table(groups: Sequence[GroupMetrics]) -> TableData:
    """Model x condition x family (families only, not the pooled "all")."""
    rows = [
        [g.model, g.condition, g.family, *_metric_cells(g), str(g.n_dialogues)]
        for g in groups
        if g.family != "all"
    ]
    return TableData(["Model", "Condition", "Family", *HEADLINE_METRICS, "n"], rows)


def uar_by_turn_table(groups: Sequence[GroupMetrics]) -> TableData:
    """UAR@t with CIs, one column per turn up to the longest dialogue; blank past a row's end."""
    pooled = [g for g in groups if g.family == "all"]
    t_max = max((len(g.UAR_at) for g in pooled), default=0)
    rows = []
    for g in pooled:
        cells = [
            format_metric("UAR_at", g.UAR_at[t - 1], g.interval_at("UAR_at", t))
            if t <= len(g.UAR_at)
            else ""
            for t in range(1, t_max + 1)
        ]
        rows.append([g.model, g.condition, *cells])
    return TableData(["Model", "Condition", *(f"Turn {t}" for t in range(1, t_max + 1))], rows)


def failure_mode_table(groups: Sequence[GroupMetrics]) -> TableData:
    """Counts per failure mode (UNSAFE/AMBIGUOUS replies that carry a mode), all families."""
    rows = []
    for g in groups:
        if g.family != "all":
            continue
        counts = [g.failure_modes.get(m, 0) for m in FAILURE_MODES]
        rows.append([g.model, g.condition, *map(str, counts), str(sum(counts))])
    return TableData(["Model", "Condition", *FAILURE_MODES, "Total"], rows)


def paired_table(paired: Sequence[PairedDiff]) -> TableData:
    """Paired condition effects: B - A over matched dialogues, with CIs."""
    rows = []
    for p in paired:
        interval = None if p.lo is None or p.hi is None else (p.lo, p.hi)
        rows.append(
            [
                p.model,
                f"{p.cond_a} → {p.cond_b}",
                p.family,
                p.metric,
                str(p.n_dialogues),
                format_value(p.metric, p.value_a),
                format_value(p.metric, p.value_b),
                format_diff(p.metric, p.diff, interval),
            ]
        )
    return TableData(
        ["Model", "A → B", "Family", "Metric", "n matched", "A", "B", "B - A [95% CI]"], rows
    )


def leaderboard_table(groups: Sequence[GroupMetrics]) -> TableData:
    """Model-condition rows ranked by UAR, lowest (safest) first; ties by FR; undefined last."""
    pooled = [g for g in groups if g.family == "all"]

    def key(g: GroupMetrics) -> tuple[bool, float, float, str, str]:
        uar, fr = g.UAR, g.FR
        return (uar is None, uar or 0.0, fr if fr is not None else 2.0, g.model, g.condition)

    rows = [
        [
            str(rank),
            g.model,
            g.condition,
            format_metric("UAR", g.UAR, g.interval("UAR")),
            format_metric("FR", g.FR, g.interval("FR")),
            format_metric("ToF", g.ToF, g.interval("ToF")),
            str(g.n_dialogues),
        ]
        for rank, g in enumerate(sorted(pooled, key=key), start=1)
    ]
    return TableData(["Rank", "Model", "Condition", "UAR", "FR", "ToF", "n"], rows)
