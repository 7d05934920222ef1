"""Reading and writing label files (CSV or JSONL).

Columns (CSV header or JSON keys): ``model``, ``condition``, ``dialogue_id``, ``family``,
``turn``, ``label``, and optionally ``failure_mode``, ``repeat`` (default 0) and
``n_turns`` (the dialogue's number of turns in its dataset; blank when unknown, see
`LabelRow.n_turns`). Extra columns are ignored. An empty or null ``label`` means *unjudged*.
Labels are matched case-insensitively (``safe`` reads as ``SAFE``); failure modes likewise
(lower-cased).

The format follows the suffix: ``.csv`` is CSV; ``.jsonl`` and ``.json`` are one JSON object per
line. A ``.json`` file whose first non-blank character is ``[`` is read as a JSON array, and
errors then name the 1-based item instead of a line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .labels import FAILURE_MODES, LABELS, LabelRow

__all__ = ["LABEL_COLUMNS", "LabelFileError", "read_labels", "write_labels"]

REQUIRED_COLUMNS: tuple[str, ...] = (
    "model",
    "condition",
    "dialogue_id",
    "family",
    "turn",
    "label",
)
LABEL_COLUMNS: tuple[str, ...] = (*REQUIRED_COLUMNS, "failure_mode", "repeat", "n_turns")
"""Column order used by `write_labels`."""

_CSV_SUFFIXES = (".csv",)
_JSON_SUFFIXES = (".jsonl", ".json")


class LabelFileError(ValueError):
    """A label file that cannot be read; the message names file, line and field.

    Attributes:
        path: The file.
        line: 1-based line (CSV header is line 1), or the item number for a JSON array;
            ``None`` when the problem is with the file as a whole.
        field: The offending column, or ``None``.
    """

    def __init__(
        self, path: Path, line: int | None, field: str | None, problem: str, *, unit: str = "line"
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = str(path)
        if line is not None:
            where += f", {unit} {line}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}")


def read_labels(path: Path) -> list[LabelRow]:
    """Read a CSV or JSONL label file into `LabelRow`s, in file order.

    Raises:
        LabelFileError: unknown suffix, missing column, unknown label or failure mode,
            a turn that is not an integer >= 1, a repeat that is not an integer >= 0, an empty
            id field, or a duplicate (model, condition, dialogue_id, repeat, turn) row
            (the message names both lines).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in _CSV_SUFFIXES:
        records: Iterable[tuple[int, Mapping[str, Any]]] = _csv_records(path)
        unit = "line"
    elif suffix in _JSON_SUFFIXES:
        text = path.read_text(encoding="utf-8-sig")
        if suffix == ".json" and text.lstrip().startswith("["):
            records = _json_array_records(path, text)
            unit = "item"
        else:
            records = _jsonl_records(path, text)
            unit = "line"
    else:
        raise LabelFileError(path, None, None, f"unknown label file suffix {path.suffix!r}")

    rows: list[LabelRow] = []
    first_seen: dict[tuple[str, str, str, int, int], int] = {}
    for line, record in records:
        row = _parse_record(path, line, record, unit)
        key = (row.model, row.condition, row.dialogue_id, row.repeat, row.turn)
        if key in first_seen:
            raise LabelFileError(
                path,
                line,
                "turn",
                f"duplicate row for model={row.model!r}, condition={row.condition!r}, "
                f"dialogue_id={row.dialogue_id!r}, repeat={row.repeat}, turn={row.turn}; "
                f"first seen on {unit} {first_seen[key]}",
                unit=unit,
            )
        first_seen[key] = line
        rows.append(row)
    return rows


def write_labels(rows: Iterable[LabelRow], path: Path) -> None:
    """Write rows as CSV or JSONL (by suffix) so that `read_labels` gives them back unchanged.

    ``None`` is written as an empty CSV cell or JSON ``null``. ``.json`` writes JSONL.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in _CSV_SUFFIXES:
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(LABEL_COLUMNS))
            writer.writeheader()
            for row in rows:
                writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})
    elif suffix in _JSON_SUFFIXES:
        with path.open("w", encoding="utf-8") as fh:
            for row in rows:
                record = {k: getattr(row, k) for k in LABEL_COLUMNS}
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        raise LabelFileError(path, None, None, f"unknown label file suffix {path.suffix!r}")


def _csv_records(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        for column in REQUIRED_COLUMNS:
            if column not in header:
                raise LabelFileError(
                    path, 1, column, f"missing column; header is: {', '.join(header) or '(empty)'}"
                )
        reader.fieldnames = header
        for record in reader:
            # line_num is the physical line where the record ended (header = line 1).
            yield reader.line_num, record


def _jsonl_records(path: Path, text: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise LabelFileError(path, line, None, f"invalid JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise LabelFileError(path, line, None, "expected a JSON object")
        yield line, record


def _json_array_records(path: Path, text: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabelFileError(path, exc.lineno, None, f"invalid JSON: {exc.msg}") from None
    for item, record in enumerate(data, start=1):
        if not isinstance(record, dict):
            raise LabelFileError(path, item, None, "expected a JSON object", unit="item")
        yield item, record


def _parse_record(path: Path, line: int, record: Mapping[str, Any], unit: str) -> LabelRow:
    def fail(field: str, problem: str) -> LabelFileError:
        return LabelFileError(path, line, field, problem, unit=unit)

    for column in REQUIRED_COLUMNS:
        if column not in record:
            raise fail(column, "missing column")

    ids: dict[str, str] = {}
    for column in ("model", "condition", "dialogue_id", "family"):
        value = record[column]
        # Numeric ids are common in hand-made files; keep them as text.
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise fail(column, f"expected a non-empty string, got {value!r}")
        ids[column] = value.strip()

    turn = _parse_int(record["turn"])
    if turn is None or turn < 1:
        raise fail("turn", f"expected an integer >= 1, got {record['turn']!r}")

    repeat_raw = record.get("repeat")
    repeat = 0 if _is_blank(repeat_raw) else _parse_int(repeat_raw)
    if repeat is None or repeat < 0:
        raise fail("repeat", f"expected an integer >= 0, got {repeat_raw!r}")

    n_turns_raw = record.get("n_turns")
    n_turns = None if _is_blank(n_turns_raw) else _parse_int(n_turns_raw)
    if not _is_blank(n_turns_raw) and (n_turns is None or n_turns < turn):
        raise fail("n_turns", f"expected an integer >= turn ({turn}), got {n_turns_raw!r}")

    label_raw = record["label"]
    label: str | None = None
    if not _is_blank(label_raw):
        label = str(label_raw).strip().upper()
        if label not in LABELS:
            raise fail("label", f"unknown label {label_raw!r}; expected one of {', '.join(LABELS)}")

    mode_raw = record.get("failure_mode")
    mode: str | None = None
    if not _is_blank(mode_raw):
        mode = str(mode_raw).strip().lower()
        if mode not in FAILURE_MODES:
            raise fail(
                "failure_mode",
                f"unknown failure mode {mode_raw!r}; expected one of {', '.join(FAILURE_MODES)}",
            )

    return LabelRow(
        model=ids["model"],
        condition=ids["condition"],
        dialogue_id=ids["dialogue_id"],
        family=ids["family"],
        turn=turn,
        label=label,
        failure_mode=mode,
        repeat=repeat,
        n_turns=n_turns,
    )


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
