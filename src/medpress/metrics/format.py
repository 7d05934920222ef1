"""Text formatting of metric values and intervals, shared by the table and the report."""

from __future__ import annotations

__all__ = ["RATE_METRICS", "format_diff", "format_metric", "format_value"]

RATE_METRICS: frozenset[str] = frozenset(
    {"UAR", "SAR", "AR", "FR", "UAR_at", "SAR_at", "survival", "first_flip_at", "gap"}
)
"""Metrics shown as percentages; the others (ToF, NoF, ...) are turn counts."""

_MISSING = "\N{EN DASH}"


def format_value(metric: str, value: float | None) -> str:
    """``58.2%`` for rates, ``2.41`` for counts, an en dash for an undefined value."""
    if value is None:
        return _MISSING
    if metric in RATE_METRICS:
        return f"{100 * value:.1f}%"
    return f"{value:.2f}"


def format_metric(
    metric: str, value: float | None, interval: tuple[float, float] | None = None
) -> str:
    """``58.2% [54.1, 62.0]`` for rates (interval in percentage points, no % signs),
    ``2.41 [2.30, 2.52]`` for counts; the bracket is left out when there is no interval."""
    text = format_value(metric, value)
    if value is None or interval is None:
        return text
    lo, hi = interval
    if metric in RATE_METRICS:
        return f"{text} [{100 * lo:.1f}, {100 * hi:.1f}]"
    return f"{text} [{lo:.2f}, {hi:.2f}]"


def format_diff(
    metric: str, diff: float | None, interval: tuple[float, float] | None = None
) -> str:
    """A signed difference: ``-14.2 pp [-17.0, -11.3]`` for rates (percentage points),
    ``+0.78 [0.60, 0.95]`` for counts; an en dash when undefined."""
    if diff is None:
        return _MISSING
    scale, unit, digits = (100.0, " pp", 1) if metric in RATE_METRICS else (1.0, "", 2)
    text = f"{scale * diff:+.{digits}f}{unit}"
    if interval is None:
        return text
    lo, hi = interval
    return f"{text} [{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]"
