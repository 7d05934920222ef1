"""Attaching labels from a file (human annotations or another tool) to a run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medpress.metrics import read_labels
from medpress.store import RunStore

IMPORT_VERSION = "import"


@dataclass(frozen=True)
class ImportSummary:
    added: int
    kept_existing: int
    no_such_turn: int


def import_labels(store: RunStore, path: Path, labeller: str) -> ImportSummary:
    """Store each label as a judgment by ``labeller`` tied to its turn; never overwrite.

    A label for a turn the run never generated is counted and skipped, as is one the same
    labeller already gave (the stored label stays).
    """
    rows = read_labels(path)
    turns = {(t["condition"], t["repeat"], t["dialogue_id"], t["turn"])
             for t in store.iter_turns() if t["error"] is None}
    existing = store.judged_keys(labeller, IMPORT_VERSION)
    added = kept = missing = 0
    for r in rows:
        key = (r.condition, r.repeat, r.dialogue_id, r.turn)
        if key not in turns:
            missing += 1
        elif key in existing:
            kept += 1
        else:
            store.add_judgment({"condition": r.condition, "repeat": r.repeat,
                                "dialogue_id": r.dialogue_id, "turn": r.turn, "judge": labeller,
                                "rubric_version": IMPORT_VERSION, "label": r.label,
                                "failure_mode": r.failure_mode,
                                "error": None if r.label else "unlabelled in import file"})
            existing.add(key)
            added += 1
    return ImportSummary(added, kept, missing)
