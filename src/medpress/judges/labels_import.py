"""Attaching labels from a file (human annotations or another tool) to a run, listing and
removing them. The file format is the one labels format (``docs/labels.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medpress.dataset import Dataset
from medpress.judges.views import ENSEMBLE, IMPORT_VERSION
from medpress.metrics.io import LabelFileError, LabelRecord, parse_label_file
from medpress.store import RunStore

TurnKey = tuple[str, int, str, int]  # (condition, repeat, dialogue_id, turn)
# How many of the run's dialogue ids an "unknown dialogue" problem shows.
_SHOW_IDS = 8


@dataclass(frozen=True)
class ImportSummary:
    """What an import did. ``no_such_turn``: rows for turns the run planned but has no reply
    for (failed or not generated yet); ``other_model``: rows whose ``model`` is another run's;
    ``other_reply``: rows whose ``reply`` is not the run's reply for that turn (labels of
    another generation of it: never attached to this one)."""

    added: int
    kept_existing: int
    no_such_turn: int
    other_model: int = 0
    other_reply: int = 0


@dataclass(frozen=True)
class RunShape:
    """What a labels file is checked against: the run's model names, conditions, repeats,
    and each dialogue's family and number of turns."""

    models: frozenset[str]
    conditions: tuple[str, ...]
    repeats: int
    families: Mapping[str, str]
    lengths: Mapping[str, int]
    generated: dict[TurnKey, str] = field(default_factory=dict)  # turn -> its reply

    @classmethod
    def of(cls, store: RunStore, ds: Dataset | None = None) -> RunShape:
        """From the run's provenance and ``ds`` (the run's dialogues). Without ``ds`` the
        families and lengths come from the stored turns, so a dialogue's length is its
        highest generated turn."""
        params = store.get_meta("params") or {}
        models = {(store.get_meta("model") or {}).get("spec"), store.get_meta("name")} - {None}
        turns = list(store.iter_turns())
        if ds is not None:
            families = {d.id: d.family for d in ds}
            lengths = {d.id: len(d.turns) for d in ds}
        else:
            families = {t["dialogue_id"]: t["family"] for t in turns}
            lengths = {}
            for t in turns:
                lengths[t["dialogue_id"]] = max(lengths.get(t["dialogue_id"], 0), t["turn"])
        conditions = params.get("conditions") or sorted({t["condition"] for t in turns})
        return cls(frozenset(str(m) for m in models), tuple(conditions),
                   int(params.get("repeats") or 1), families, lengths,
                   {(t["condition"], t["repeat"], t["dialogue_id"], t["turn"]): t["reply"] or ""
                    for t in turns if t["error"] is None})


def import_labels(store: RunStore, path: Path, labeller: str,
                  ds: Dataset | None = None) -> ImportSummary:
    """Store each label as a judgment by ``labeller`` tied to its turn; never overwrite.

    A row needs ``condition``, ``dialogue_id``, ``turn`` and ``label`` (``repeat`` defaults to
    0). ``model`` is optional: a row naming another model (not the run's spec nor its display
    name) is counted and skipped, so one file may hold several runs' labels. ``family`` and
    ``n_turns`` are optional and, when present, must match ``ds`` (the run's dialogues).
    A row for a turn the run planned but never generated is counted and skipped, as is a row
    whose ``reply`` (when the file has one) differs from the run's reply for that turn (a label
    of another generation, e.g. on another machine), and one the same labeller already gave,
    blank or not (the stored row stays, so importing a file
    twice changes nothing). Nothing is stored unless the whole file is sound.

    Raises:
        LabelFileError: with every problem of the file (format, then each row checked against
            the run: missing condition, unknown condition, dialogue not in the run, turn
            beyond the dialogue, repeat beyond the run's, family or n_turns that disagree,
            the same turn twice), each as ``file:line: field: problem``.
        ValueError: when no row matches a turn of the run (an empty file, every row for
            another model, or every turn never generated).
    """
    path = Path(path)
    check_labeller(store, labeller)
    records, unit, problems = parse_label_file(path)
    if not records and not problems:
        raise ValueError(f"{path}: no rows to import; see docs/labels.md for the format")
    shape = RunShape.of(store, ds)
    ours = [r for r in records if r.model is None or r.model in shape.models]
    problems += check_against_run(path, ours, shape, unit)
    if problems:
        # in file order, so each bad line's problems are read together
        raise LabelFileError.combine(sorted(problems, key=lambda p: p.line or 0))
    if not ours:
        found = ", ".join(sorted({r.model for r in records if r.model}))
        raise ValueError(f"{path}: no row is for this run's model "
                         f"({', '.join(sorted(shape.models))}); the file's model column holds: "
                         f"{found}. Import it into the run of that model")
    existing = {(j["condition"], j["repeat"], j["dialogue_id"], j["turn"])
                for j in store.iter_judgments(labeller) if j["rubric_version"] == IMPORT_VERSION}
    added = kept = missing = other_reply = 0
    for r in ours:
        key = _key(r)
        reply = (r.fields or {}).get("reply")
        if key not in shape.generated:
            missing += 1
        elif reply not in (None, "") and str(reply).strip() != shape.generated[key].strip():
            other_reply += 1
        elif key in existing:
            kept += 1
        else:
            store.add_judgment({"condition": key[0], "repeat": key[1], "dialogue_id": key[2],
                                "turn": key[3], "judge": labeller,
                                "rubric_version": IMPORT_VERSION, "label": r.label,
                                "failure_mode": r.failure_mode,
                                "error": None if r.label else "unlabelled in import file"})
            existing.add(key)
            added += 1
    if not added and not kept:
        others = len(records) - len(ours)
        raise ValueError(f"{path}: none of its {len(records)} row(s) is for a reply this run "
                         f"has ({missing} for turns not generated: failed or not run yet"
                         + (f"; {others} for other models" if others else "")
                         + (f"; {other_reply} for other replies than the run's" if other_reply
                            else "")
                         + "); resume the run with the command that started it, or check the file")
    return ImportSummary(added, kept, missing, len(records) - len(ours), other_reply)


def check_labeller(store: RunStore, labeller: str) -> None:
    """A labeller's name must not be a judge's of this run, nor a view's keyword, so tables
    and ``--judge NAME`` never confuse the two.

    Raises:
        ValueError: for an empty name, ``ensemble``, or the name of one of the run's judges.
    """
    if not labeller.strip() or "," in labeller or "@" in labeller:
        raise ValueError(f"--labeller {labeller!r}: give a name without ',' or '@'")
    if labeller == ENSEMBLE:
        raise ValueError(f"--labeller {ENSEMBLE!r} is reserved (--judge ensemble); pick another")
    if any(name == labeller and version != IMPORT_VERSION for name, version in store.judges()):
        raise ValueError(f"--labeller {labeller!r} is the name of a judge of this run; pick "
                         "another name for imported labels")


def check_against_run(path: Path, rows: list[LabelRecord], shape: RunShape,
                      unit: str = "line") -> list[LabelFileError]:
    """Every problem of ``rows`` (this run's model, or no model) against the run.

    A row with a bad condition or dialogue gets that one problem; later checks need both.
    """
    problems: list[LabelFileError] = []

    def fail(r: LabelRecord, column: str, problem: str) -> None:
        problems.append(LabelFileError(path, r.line, column, problem, unit=unit))

    conditions = ", ".join(shape.conditions)
    first_seen: dict[TurnKey, int] = {}
    for r in rows:
        if r.condition is None:
            fail(r, "condition", "missing; labels import needs condition, dialogue_id and turn "
                 f"to find the reply (this run's conditions: {conditions})")
            continue
        if r.condition not in shape.conditions:
            fail(r, "condition", f"unknown condition {r.condition!r}; this run's conditions: "
                 f"{conditions}")
            continue
        length = shape.lengths.get(r.dialogue_id)
        if length is None:
            fail(r, "dialogue_id", f"dialogue {r.dialogue_id!r} is not in this run "
                 f"({len(shape.lengths)} dialogues: {_some(shape.lengths)})")
            continue
        if r.turn > length:
            fail(r, "turn", f"turn {r.turn} is beyond dialogue {r.dialogue_id}'s {length} turns")
        if r.repeat is not None and r.repeat >= shape.repeats:
            fail(r, "repeat", f"repeat {r.repeat} but this run has {shape.repeats} repeat(s), "
                 f"numbered from 0")
        family = shape.families.get(r.dialogue_id)
        if r.family is not None and family is not None and r.family != family:
            fail(r, "family", f"{r.family!r}, but dialogue {r.dialogue_id} is {family!r} in the "
                 "run's dataset")
        if r.n_turns is not None and r.n_turns != length:
            fail(r, "n_turns", f"{r.n_turns}, but dialogue {r.dialogue_id} has {length} turns")
        key = _key(r)
        if key in first_seen:
            fail(r, "turn", f"the same turn as {unit} {first_seen[key]} (condition "
                 f"{key[0]}, repeat {key[1]}, dialogue {key[2]}, turn {key[3]})")
        first_seen.setdefault(key, r.line)
    return problems


def imported_labellers(store: RunStore) -> list[str]:
    """Names with labels attached by ``labels import`` (rubric version ``import``)."""
    return [name for name, version in store.judges() if version == IMPORT_VERSION]


def remove_labels(store: RunStore, labeller: str) -> int:
    """Delete every label ``labeller`` imported; the number removed. Judges' verdicts (any
    other rubric version, even under the same name) are never touched.

    Raises:
        ValueError: ``labeller`` has no imported labels in this run; lists those that do.
    """
    names = imported_labellers(store)
    if labeller not in names:
        judges = {name for name, version in store.judges() if version != IMPORT_VERSION}
        why = (f"; {labeller!r} is a judge, whose verdicts labels remove never deletes"
               if labeller in judges else "")
        raise ValueError(f"no imported labels by {labeller!r} in {store.run_dir}{why}; "
                         f"labellers with imported labels: {', '.join(names) or 'none'}")
    return store.delete_judgments(labeller, IMPORT_VERSION)


def _key(r: LabelRecord) -> TurnKey:
    assert r.condition is not None  # checked by check_against_run
    return (r.condition, r.repeat or 0, r.dialogue_id, r.turn)


def _some(ids: Mapping[str, Any]) -> str:
    shown = sorted(ids)[:_SHOW_IDS]
    return ", ".join(shown) + (", …" if len(ids) > _SHOW_IDS else "")
