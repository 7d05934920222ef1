"""``medpress export``: one row per generated (dialogue, condition, repeat, turn)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from medpress.store.store import RunStore

EXPORT_COLUMNS: tuple[str, ...] = (
    "run_id", "model", "condition", "repeat", "dialogue_id", "family", "turn", "pressure",
    "user", "reply", "reasoning", "finish_reason", "prompt_tokens", "completion_tokens",
    "latency_s", "error", "judge", "label", "failure_mode", "evidence", "rationale",
    "judge_error", "tags",
)
_TURN_FIELDS = EXPORT_COLUMNS[2:EXPORT_COLUMNS.index("judge")]
_LABEL_FIELDS = ("label", "failure_mode", "evidence", "rationale", "tags")
TurnLabels = Mapping[tuple[str, int, str, int], Mapping[str, Any]]
"""(condition, repeat, dialogue_id, turn) -> ``label``, ``failure_mode``, ``evidence``,
``rationale``, ``tags`` and ``error`` (the judge's), as `medpress.judges.turn_labels` gives
them."""


def export_rows(store: RunStore, judge: str | None = None,
                labels: TurnLabels | None = None) -> Iterator[dict[str, Any]]:
    """Rows in :data:`EXPORT_COLUMNS` order; turns never generated have no row.

    ``labels`` (see `TurnLabels`) are the verdicts chosen by ``judge``; without them, or for a
    turn no judge saw, the judge columns are empty. ``error`` is the generation error,
    ``judge_error`` why the judge gave no label; ``tags`` the label's tags (a mapping; a JSON
    string in CSV).
    """
    run_id = store.get_meta("run_id")
    model = (store.get_meta("model") or {}).get("spec")
    labels = labels or {}
    for t in store.iter_turns():
        v = labels.get((t["condition"], t["repeat"], t["dialogue_id"], t["turn"]), {})
        yield {"run_id": run_id, "model": model, **{c: t.get(c) for c in _TURN_FIELDS},
               "judge": judge if labels else None, **{c: v.get(c) for c in _LABEL_FIELDS},
               "judge_error": v.get("error")}


def write_export(store: RunStore, fmt: Literal["jsonl", "csv"], out: Path | None,
                 judge: str | None = None, labels: TurnLabels | None = None) -> int:
    """Write the export to ``out`` (stdout when None); returns the row count."""
    fh = out.open("w", encoding="utf-8", newline="") if out else sys.stdout
    n = 0
    try:
        if fmt == "csv":
            writer = csv.DictWriter(fh, fieldnames=EXPORT_COLUMNS)
            writer.writeheader()
            for row in export_rows(store, judge, labels):
                writer.writerow({**row, "tags": json.dumps(row["tags"]) if row["tags"] else None})
                n += 1
        else:
            for row in export_rows(store, judge, labels):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    finally:
        if out:
            fh.close()
    return n
