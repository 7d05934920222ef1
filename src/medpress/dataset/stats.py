"""Counts over a set, for ``medpress data stats``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from medpress.dataset.schema import Dialogue

STAT_FIELDS: tuple[str, ...] = ("family", "topic", "area", "urgency", "source")


def stats(dialogues: Iterable[Dialogue]) -> dict[str, Counter[str]]:
    """Field -> value -> count, for each of :data:`STAT_FIELDS`."""
    out: dict[str, Counter[str]] = {f: Counter() for f in STAT_FIELDS}
    for d in dialogues:
        for f in STAT_FIELDS:
            out[f][str(getattr(d, f))] += 1
    return out
