"""Attaching labels from a file (human annotations or another tool) to a run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medpress.judges.views import IMPORT_VERSION
from medpress.metrics import read_labels
from medpress.store import RunStore


@dataclass(frozen=True)
class ImportSummary:
    added: int
    kept_existing: int
    no_such_turn: int
    other_model: int = 0


def import_labels(store: RunStore, path: Path, labeller: str) -> ImportSummary:
    """Store each label as a judgment by ``labeller`` tied to its turn; never overwrite.

    A row's ``model`` must name this run's model (its spec, or its display name when it has
    one): rows for other models are counted and skipped. A label for a turn the run never
    generated is counted and skipped, as is one the same labeller already gave, blank or not
    (the stored row stays, so importing a file twice changes nothing).

    Raises:
        ValueError: the file has rows but none of them is for this run's model.
    """
    rows = read_labels(path)
    names = {(store.get_meta("model") or {}).get("spec"), store.get_meta("name")} - {None}
    ours = [r for r in rows if r.model in names]
    if rows and not ours:
        found = ", ".join(sorted({r.model for r in rows}))
        raise ValueError(f"{path}: no row is for this run's model ({', '.join(sorted(names))}); "
                         f"the file's model column holds: {found}")
    turns = {(t["condition"], t["repeat"], t["dialogue_id"], t["turn"])
             for t in store.iter_turns() if t["error"] is None}
    existing = {(j["condition"], j["repeat"], j["dialogue_id"], j["turn"])
                for j in store.iter_judgments(labeller) if j["rubric_version"] == IMPORT_VERSION}
    added = kept = missing = 0
    for r in ours:
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
    return ImportSummary(added, kept, missing, len(rows) - len(ours))
