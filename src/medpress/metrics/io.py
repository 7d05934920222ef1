"""Reading and writing label files (CSV or JSONL): the one MedPRESS labels format.

One row is one labelled (or unlabelled) assistant reply; ``docs/labels.md`` has the full
story. Columns (CSV header or JSON keys), by role:

* always required: ``dialogue_id``, ``turn`` (1-based) and ``label`` (``SAFE``, ``UNSAFE``,
  ``AMBIGUOUS``; empty or null means *unlabelled*);
* where the reply sits in a run: ``model``, ``condition``, ``repeat`` (default 0) — optional
  here; ``labels import`` needs ``condition``;
* optional: ``failure_mode``, ``family`` and ``n_turns`` (filled from the dataset where
  blank), and for ``judge-check`` the reply and its context: ``id``, ``reply``,
  ``conversation``, ``history``.

Extra columns are ignored, so ``medpress export`` output, the shipped ``labels/`` files and
files written by `write_labels` all read. A row without ``model`` takes the file's name
(``labels/smollm2_heldout.jsonl`` -> ``smollm2_heldout``); a row without ``condition`` gets
`NO_CONDITION`, and then the ``conversation`` ids of one dialogue number its repeats in file
order (each conversation is one run of the dialogue). A blank optional cell counts as absent.
Labels are matched case-insensitively (``safe`` reads as ``SAFE``); failure modes likewise
(lower-cased).

The format follows the suffix: ``.csv`` is CSV; ``.jsonl`` and ``.json`` are one JSON object per
line. A ``.json`` file whose first non-blank character is ``[`` is read as a JSON array, and
errors then name the 1-based item instead of a line.

Every problem of a file is found before anything is raised: `LabelFileError.problems` holds
each one as ``file:line: field: problem``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .labels import FAILURE_MODES, LABELS, LabelRow

__all__ = [
    "LABEL_COLUMNS",
    "NO_CONDITION",
    "REQUIRED_COLUMNS",
    "LabelFileError",
    "LabelRecord",
    "parse_label_file",
    "read_label_records",
    "read_labels",
    "write_labels",
]

REQUIRED_COLUMNS: tuple[str, ...] = ("dialogue_id", "turn", "label")
"""Columns every labels file has, whatever reads it."""
LABEL_COLUMNS: tuple[str, ...] = (
    "model", "condition", "dialogue_id", "family", "turn", "label", "failure_mode", "repeat",
    "n_turns",
)  # fmt: skip
"""Column order used by `write_labels`."""
NO_CONDITION = "unspecified"
"""The condition of a row that names none (the ``judge-check`` shape)."""

# Optional identifying columns: read as text, a blank cell meaning "absent".
_TEXT_COLUMNS = ("model", "condition", "family", "conversation")
_CSV_SUFFIXES = (".csv",)
_JSON_SUFFIXES = (".jsonl", ".json")


class LabelFileError(ValueError):
    """A label file that cannot be used; the message names file, line and field.

    Attributes:
        path: The file.
        line: 1-based line (CSV header is line 1), or the item number for a JSON array;
            ``None`` when the problem is with the file as a whole.
        field: The offending column, or ``None``.
        problems: Every problem found in the file, this one first; for several, the message
            is the first one's plus how many more there are.
    """

    def __init__(
        self, path: Path, line: int | None, field: str | None, problem: str, *, unit: str = "line"
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.problems: list[LabelFileError] = [self]
        where = str(path)
        if line is not None:
            where += f":{line}" if unit == "line" else f": {unit} {line}"
        if field is not None:
            where += f": {field}"
        super().__init__(f"{where}: {problem}")

    @classmethod
    def combine(cls, problems: Sequence[LabelFileError]) -> LabelFileError:
        """One error standing for all of ``problems`` (at least one)."""
        first = problems[0]
        if len(problems) == 1:
            return first
        err = cls.__new__(cls)
        ValueError.__init__(
            err, f"{first} (and {len(problems) - 1} more problem(s) in {first.path})"
        )
        err.path, err.line, err.field = first.path, first.line, first.field
        err.problems = list(problems)
        return err


@dataclass(frozen=True)
class LabelRecord:
    """One row of a labels file as written: an absent or blank optional column is ``None``.

    ``fields`` is the raw row, for readers that need more columns (``judge-check`` reads
    ``id``, ``reply`` and ``history`` from it).
    """

    line: int
    dialogue_id: str
    turn: int
    label: str | None
    failure_mode: str | None = None
    model: str | None = None
    condition: str | None = None
    family: str | None = None
    repeat: int | None = None
    n_turns: int | None = None
    conversation: str | None = None
    fields: Mapping[str, Any] | None = None


def read_label_records(path: Path) -> tuple[list[LabelRecord], str]:
    """Every row of a CSV or JSONL labels file, and the unit its rows are counted in
    (``line``, or ``item`` for a JSON array). Blank lines are skipped.

    Raises:
        LabelFileError: with every problem of the file: unknown suffix, missing required
            column, invalid JSON, unknown label or failure mode, a turn that is not an
            integer >= 1, a repeat that is not an integer >= 0, an empty ``dialogue_id``.
    """
    records, unit, problems = parse_label_file(path)
    if problems:
        raise LabelFileError.combine(problems)
    return records, unit


def parse_label_file(path: Path) -> tuple[list[LabelRecord], str, list[LabelFileError]]:
    """As `read_label_records`, but returning the rows that parsed, the unit and every
    problem instead of raising for bad rows, so a caller can check the good rows further
    and report all problems together.

    Raises:
        LabelFileError: only for a file that cannot be read at all (unknown suffix, a CSV
            header without a required column, a JSON array that is not valid JSON).
    """
    path = Path(path)
    raw, unit, problems = _records(path)
    out: list[LabelRecord] = []
    for line, record in raw:
        parsed, bad = _parse_record(path, line, record, unit)
        problems += bad
        if parsed is not None:
            out.append(parsed)
    return out, unit, problems


def read_labels(path: Path) -> list[LabelRow]:
    """Read a labels file into `LabelRow`s, in file order, for the metrics.

    A row without ``model`` takes the file's stem; without ``condition``, `NO_CONDITION`,
    and its ``conversation`` (if any) numbers the repeat among those of its dialogue when
    ``repeat`` is absent. A blank ``family`` stays ``""`` (``metrics --labels`` fills it
    from the dataset).

    Raises:
        LabelFileError: every problem of `read_label_records`, plus each duplicate (model,
            condition, dialogue_id, repeat, turn) row (the message names both lines).
    """
    path = Path(path)
    records, unit = read_label_records(path)
    rows: list[LabelRow] = []
    problems: list[LabelFileError] = []
    first_seen: dict[tuple[str, str, str, int, int], int] = {}
    conversations: dict[tuple[str, str, str], dict[str, int]] = {}
    for rec in records:
        model = rec.model or path.stem
        condition = rec.condition or NO_CONDITION
        repeat = rec.repeat
        if repeat is None and rec.condition is None and rec.conversation is not None:
            seen = conversations.setdefault((model, condition, rec.dialogue_id), {})
            repeat = seen.setdefault(rec.conversation, len(seen))
        row = LabelRow(model, condition, rec.dialogue_id, rec.family or "", rec.turn, rec.label,
                       rec.failure_mode, repeat or 0, rec.n_turns)  # fmt: skip
        key = (row.model, row.condition, row.dialogue_id, row.repeat, row.turn)
        if key in first_seen:
            problems.append(LabelFileError(
                path, rec.line, "turn",
                f"duplicate row for model={row.model!r}, condition={row.condition!r}, "
                f"dialogue_id={row.dialogue_id!r}, repeat={row.repeat}, turn={row.turn}; "
                f"first seen on {unit} {first_seen[key]}", unit=unit))  # fmt: skip
            continue
        first_seen[key] = rec.line
        rows.append(row)
    if problems:
        raise LabelFileError.combine(problems)
    return rows


def write_labels(rows: Iterable[LabelRow], path: Path) -> None:
    """Write rows as CSV or JSONL (by suffix) so that `read_labels` gives them back unchanged.

    ``None`` is written as an empty CSV cell or JSON ``null``. ``.json`` writes JSONL. Tags
    are not written: a label file carries labels only.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in _CSV_SUFFIXES:
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(LABEL_COLUMNS))
            writer.writeheader()
            for row in rows:
                writer.writerow({k: "" if (v := getattr(row, k)) is None else v
                                 for k in LABEL_COLUMNS})
    elif suffix in _JSON_SUFFIXES:
        with path.open("w", encoding="utf-8") as fh:
            for row in rows:
                record = {k: getattr(row, k) for k in LABEL_COLUMNS}
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        raise LabelFileError(path, None, None, f"unknown label file suffix {path.suffix!r}")


Records = list[tuple[int, Mapping[str, Any]]]


def _records(path: Path) -> tuple[Records, str, list[LabelFileError]]:
    """(line, raw row) pairs, the unit, and the problems found so far (bad JSON lines).

    Raises:
        LabelFileError: for an unknown suffix, or a CSV header without a required column
            (nothing else of such a file can be read).
    """
    suffix = path.suffix.lower()
    if suffix in _CSV_SUFFIXES:
        return _csv_records(path), "line", []
    if suffix in _JSON_SUFFIXES:
        text = path.read_text(encoding="utf-8-sig")
        if suffix == ".json" and text.lstrip().startswith("["):
            records, problems = _json_array_records(path, text)
            return records, "item", problems
        records, problems = _jsonl_records(path, text)
        return records, "line", problems
    raise LabelFileError(
        path, None, None, f"unknown label file suffix {path.suffix!r}; use .csv or .jsonl"
    )


def _csv_records(path: Path) -> Records:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            shown = ", ".join(header) or "(empty)"
            raise LabelFileError.combine(
                [LabelFileError(path, 1, c, f"missing column; header is: {shown}") for c in missing]
            )
        reader.fieldnames = header
        # line_num is the physical line where the record ended (header = line 1).
        return [(reader.line_num, record) for record in reader]


def _jsonl_records(path: Path, text: str) -> tuple[Records, list[LabelFileError]]:
    out: Records = []
    problems: list[LabelFileError] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(LabelFileError(path, line, None, f"invalid JSON: {exc.msg}"))
            continue
        if not isinstance(record, dict):
            problems.append(LabelFileError(path, line, None, "expected a JSON object"))
            continue
        out.append((line, record))
    return out, problems


def _json_array_records(path: Path, text: str) -> tuple[Records, list[LabelFileError]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabelFileError(path, exc.lineno, None, f"invalid JSON: {exc.msg}") from None
    out: Records = []
    problems: list[LabelFileError] = []
    for item, record in enumerate(data, start=1):
        if isinstance(record, dict):
            out.append((item, record))
        else:
            problems.append(LabelFileError(path, item, None, "expected a JSON object", unit="item"))
    return out, problems


def _parse_record(
    path: Path, line: int, record: Mapping[str, Any], unit: str
) -> tuple[LabelRecord | None, list[LabelFileError]]:
    """The row, or None with every problem of it (one per bad field)."""
    problems: list[LabelFileError] = []

    def fail(field: str, problem: str) -> None:
        problems.append(LabelFileError(path, line, field, problem, unit=unit))

    for column in REQUIRED_COLUMNS:
        if column not in record:
            fail(column, "missing column")
    if problems:
        return None, problems

    dialogue_id = _text(record["dialogue_id"])
    if dialogue_id is None:
        fail("dialogue_id", f"expected a non-empty string, got {record['dialogue_id']!r}")
    texts: dict[str, str | None] = {}
    for column in _TEXT_COLUMNS:
        value = record.get(column)
        texts[column] = None if _is_blank(value) else _text(value)
        if texts[column] is None and not _is_blank(value):
            fail(column, f"expected a string, got {value!r}")

    turn = _parse_int(record["turn"])
    if turn is None or turn < 1:
        fail("turn", f"expected an integer >= 1, got {record['turn']!r}")

    repeat_raw = record.get("repeat")
    repeat = None if _is_blank(repeat_raw) else _parse_int(repeat_raw)
    if not _is_blank(repeat_raw) and (repeat is None or repeat < 0):
        fail("repeat", f"expected an integer >= 0, got {repeat_raw!r}")

    n_turns_raw = record.get("n_turns")
    n_turns = None if _is_blank(n_turns_raw) else _parse_int(n_turns_raw)
    if not _is_blank(n_turns_raw) and (n_turns is None or n_turns < (turn or 1)):
        fail("n_turns", f"expected an integer >= turn ({turn}), got {n_turns_raw!r}")

    label = _choice(record["label"], LABELS, str.upper)
    if label is False:
        fail("label", f"unknown label {record['label']!r}; expected one of {', '.join(LABELS)}")
    mode = _choice(record.get("failure_mode"), FAILURE_MODES, str.lower)
    if mode is False:
        fail("failure_mode", f"unknown failure mode {record.get('failure_mode')!r}; expected "
                             f"one of {', '.join(FAILURE_MODES)}")  # fmt: skip

    if problems:
        return None, problems
    assert dialogue_id is not None and turn is not None and label is not False
    assert mode is not False
    return LabelRecord(
        line=line, dialogue_id=dialogue_id, turn=turn, label=label, failure_mode=mode,
        model=texts["model"], condition=texts["condition"], family=texts["family"],
        repeat=repeat, n_turns=n_turns, conversation=texts["conversation"], fields=record,
    ), []  # fmt: skip


def _text(value: Any) -> str | None:
    """A stripped non-empty string; numeric ids (common in hand-made files) kept as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()


def _choice(
    value: Any, allowed: Sequence[str], case: Callable[[str], str]
) -> str | Literal[False] | None:
    """``value`` normalised by ``case`` if it is one of ``allowed``; None when blank; False
    when it is something else (the caller reports it)."""
    if _is_blank(value):
        return None
    text = case(str(value).strip())
    return text if text in allowed else False


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _parse_int(value: Any) -> int | None:
    """Return ``value`` as an int, or None if it is not an integer (bools and 2.5 are not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None
