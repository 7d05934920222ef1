"""Machine-readable CSV exports of the report's numbers (full precision, blanks for None)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from medpress.metrics import FAILURE_MODES, HEADLINE_METRICS, GroupMetrics, PairedDiff

__all__ = [
    "write_failure_modes_csv",
    "write_groups_csv",
    "write_paired_csv",
    "write_uar_by_turn_csv",
]

_GROUP_KEYS = ("model", "condition", "family")


def _write(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if v is None else v for v in row])
    return path


_GROUP_SCALARS = (*HEADLINE_METRICS, "ToF_flipped", "ToF_safe")
_TURN_METRICS = ("UAR_at", "SAR_at", "survival", "first_flip_at")


def _with_bounds(value: float | None, interval: tuple[float, float] | None) -> list[Any]:
    return [value, *(interval if interval is not None else (None, None))]


def write_groups_csv(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """One row per group: counts, every scalar metric, and ``<metric>_lo``/``_hi`` bounds."""
    header = [*_GROUP_KEYS, "n_dialogues", "n_turns_judged", "unjudged", "not_generated"]
    for m in _GROUP_SCALARS:
        header += [m, f"{m}_lo", f"{m}_hi"]
    rows = []
    for g in groups:
        row: list[Any] = [
            g.model,
            g.condition,
            g.family,
            g.n_dialogues,
            g.n_turns_judged,
            g.unjudged,
            g.not_generated,
        ]
        for m in _GROUP_SCALARS:
            row += _with_bounds(g.value(m), g.interval(m))
        rows.append(row)
    return _write(path, header, rows)


def write_uar_by_turn_csv(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """One row per group and turn: UAR@t, SAR@t, survival (no UNSAFE up to and including t)
    and first_flip_at (share of flipped dialogues first flipping at t), each with bounds."""
    header = [*_GROUP_KEYS, "turn"]
    for m in _TURN_METRICS:
        name = m.removesuffix("_at") if m in ("UAR_at", "SAR_at") else m
        header += [name, f"{name}_lo", f"{name}_hi"]
    rows = []
    for g in groups:
        for t in range(1, len(g.UAR_at) + 1):
            row: list[Any] = [g.model, g.condition, g.family, t]
            for m in _TURN_METRICS:
                row += _with_bounds(getattr(g, m)[t - 1], g.interval_at(m, t))
            rows.append(row)
    return _write(path, header, rows)


def write_failure_modes_csv(groups: Sequence[GroupMetrics], path: Path) -> Path:
    """One row per group and failure mode: count and share of the group's moded failures."""
    rows = []
    for g in groups:
        total = sum(g.failure_modes.values())
        for mode in FAILURE_MODES:
            count = g.failure_modes.get(mode, 0)
            rows.append(
                [g.model, g.condition, g.family, mode, count, count / total if total else None]
            )
    return _write(path, [*_GROUP_KEYS, "failure_mode", "count", "share"], rows)


def write_paired_csv(paired: Sequence[PairedDiff], path: Path) -> Path:
    """One row per paired comparison (``diff`` = B - A)."""
    header = [
        "model",
        "cond_a",
        "cond_b",
        "family",
        "metric",
        "n_dialogues",
        "value_a",
        "value_b",
        "diff",
        "lo",
        "hi",
    ]
    rows = [
        [
            p.model,
            p.cond_a,
            p.cond_b,
            p.family,
            p.metric,
            p.n_dialogues,
            p.value_a,
            p.value_b,
            p.diff,
            p.lo,
            p.hi,
        ]
        for p in paired
    ]
    return _write(path, header, rows)
