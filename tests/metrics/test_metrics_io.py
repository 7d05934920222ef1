"""Label files: round-trips and one malformed fixture per error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medpress.metrics import LabelFileError, LabelRow, read_labels, write_labels

HEADER = "model,condition,dialogue_id,family,turn,label,failure_mode,repeat"
GOOD = "m,direct,MT-0001,medication_treatment,1,SAFE,,0"

ROWS = [
    LabelRow("m", "direct", "MT-0001", "medication_treatment", 1, "SAFE"),
    LabelRow("m", "direct", "MT-0001", "medication_treatment", 2, "UNSAFE", "caveated_permission"),
    LabelRow("m", "direct", "MT-0001", "medication_treatment", 3, None),
    LabelRow("m", "direct", "MT-0001", "medication_treatment", 1, "AMBIGUOUS",
             "noncommittal_hedge", repeat=1),
    LabelRow("model, with comma", "persona_anti", "ST-0002", "symptom_triage", 1, "SAFE"),
    LabelRow("m", "direct", "MT-0009", "medication_treatment", 2, "SAFE", n_turns=5),
]  # fmt: skip


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".json"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"labels{suffix}"
    write_labels(ROWS, path)
    assert read_labels(path) == ROWS


def test_optional_columns_and_lenient_values(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(
        "model,condition,dialogue_id,family,turn,label,judge_notes\n"
        "m,direct,a,f,1, safe ,x\n"
        "m,direct,a,f,2,,y\n"
        "m,direct,a,f,3,Unsafe,z\n"
    )
    assert read_labels(path) == [
        LabelRow("m", "direct", "a", "f", 1, "SAFE"),
        LabelRow("m", "direct", "a", "f", 2, None),  # empty label: unjudged
        LabelRow("m", "direct", "a", "f", 3, "UNSAFE"),
    ]


def test_jsonl_nulls_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    records = [
        {"model": "m", "condition": "c", "dialogue_id": 7, "family": "f", "turn": 1,
         "label": None, "failure_mode": None},
        {"model": "m", "condition": "c", "dialogue_id": 7, "family": "f", "turn": "2",
         "label": "AMBIGUOUS", "repeat": 2},
    ]  # fmt: skip
    path.write_text(
        "\n".join(json.dumps(r) for r in records[:1]) + "\n\n" + json.dumps(records[1]) + "\n"
    )
    assert read_labels(path) == [
        LabelRow("m", "c", "7", "f", 1, None),
        LabelRow("m", "c", "7", "f", 2, "AMBIGUOUS", repeat=2),
    ]


def test_json_array(tmp_path: Path) -> None:
    path = tmp_path / "labels.json"
    rec = {"model": "m", "condition": "c", "dialogue_id": "a", "family": "f", "turn": 1}
    path.write_text(json.dumps([{**rec, "label": "SAFE"}, {**rec, "turn": 2, "label": "X"}]))
    with pytest.raises(LabelFileError, match=r"item 2: label: unknown label"):
        read_labels(path)


def _assert_names(err: LabelFileError, path: Path, line: int, field: str) -> None:
    text = str(err)
    assert str(path) in text
    assert f"{path}:{line}: {field}: " in text
    assert (err.path, err.line, err.field) == (path, line, field)


def _csv(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _jsonl(tmp_path: Path, *records: dict[str, object]) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


REC: dict[str, object] = {
    "model": "m", "condition": "direct", "dialogue_id": "a", "family": "f", "turn": 1,
    "label": "SAFE",
}  # fmt: skip


def test_csv_unknown_label(tmp_path: Path) -> None:
    path = _csv(tmp_path, HEADER, GOOD, "m,direct,MT-0001,medication_treatment,2,SAFEISH,,0")
    with pytest.raises(LabelFileError, match="unknown label 'SAFEISH'") as info:
        read_labels(path)
    _assert_names(info.value, path, 3, "label")


def test_csv_missing_column_names_header(tmp_path: Path) -> None:
    path = _csv(tmp_path, "model,condition,dialogue_id,label", "m,direct,a,SAFE")
    with pytest.raises(LabelFileError, match="missing column; header is: model, condition") as info:
        read_labels(path)
    _assert_names(info.value, path, 1, "turn")


def test_csv_duplicate_row_names_both_lines(tmp_path: Path) -> None:
    path = _csv(tmp_path, HEADER, GOOD, "m,direct,MT-0001,medication_treatment,2,SAFE,,0",
                "m,direct,MT-0001,medication_treatment,1,UNSAFE,,0")  # fmt: skip
    with pytest.raises(LabelFileError, match=r"duplicate row.*first seen on line 2") as info:
        read_labels(path)
    _assert_names(info.value, path, 4, "turn")


def test_csv_same_turn_other_repeat_is_not_duplicate(tmp_path: Path) -> None:
    path = _csv(tmp_path, HEADER, GOOD, "m,direct,MT-0001,medication_treatment,1,SAFE,,1")
    assert len(read_labels(path)) == 2


@pytest.mark.parametrize("turn", ["0", "two", "1.5", "", "-3"])
def test_csv_bad_turn(tmp_path: Path, turn: str) -> None:
    path = _csv(tmp_path, HEADER, GOOD, f"m,direct,MT-0001,medication_treatment,{turn},SAFE,,0")
    with pytest.raises(LabelFileError, match="expected an integer >= 1") as info:
        read_labels(path)
    _assert_names(info.value, path, 3, "turn")


def test_csv_unknown_failure_mode(tmp_path: Path) -> None:
    path = _csv(tmp_path, HEADER, "m,direct,a,f,1,UNSAFE,vibes,0")
    with pytest.raises(LabelFileError, match="unknown failure mode 'vibes'") as info:
        read_labels(path)
    _assert_names(info.value, path, 2, "failure_mode")


def test_csv_bad_repeat(tmp_path: Path) -> None:
    path = _csv(tmp_path, HEADER, "m,direct,a,f,1,SAFE,,-1")
    with pytest.raises(LabelFileError) as info:
        read_labels(path)
    _assert_names(info.value, path, 2, "repeat")


def test_jsonl_unknown_label(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, REC, {**REC, "turn": 2, "label": "MAYBE"})
    with pytest.raises(LabelFileError, match="unknown label") as info:
        read_labels(path)
    _assert_names(info.value, path, 2, "label")


def test_jsonl_missing_column_names_line(tmp_path: Path) -> None:
    record = {k: v for k, v in REC.items() if k != "dialogue_id"}
    path = _jsonl(tmp_path, REC, {**REC, "turn": 2}, record)
    with pytest.raises(LabelFileError, match="missing column") as info:
        read_labels(path)
    _assert_names(info.value, path, 3, "dialogue_id")


def test_jsonl_duplicate_row(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, REC, {**REC, "label": "UNSAFE"})
    with pytest.raises(LabelFileError, match="first seen on line 1") as info:
        read_labels(path)
    _assert_names(info.value, path, 2, "turn")


@pytest.mark.parametrize("turn", [0, 2.5, True, None, "x"])
def test_jsonl_bad_turn(tmp_path: Path, turn: object) -> None:
    path = _jsonl(tmp_path, {**REC, "turn": turn})
    with pytest.raises(LabelFileError) as info:
        read_labels(path)
    _assert_names(info.value, path, 1, "turn")


def test_jsonl_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(REC) + "\n{not json\n")
    with pytest.raises(LabelFileError, match=r"bad.jsonl:2: invalid JSON"):
        read_labels(path)


def test_empty_id_rejected(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, {**REC, "dialogue_id": " "})
    with pytest.raises(LabelFileError) as info:
        read_labels(path)
    _assert_names(info.value, path, 1, "dialogue_id")


def test_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "labels.xlsx"
    path.write_text("")
    with pytest.raises(LabelFileError, match="unknown label file suffix"):
        read_labels(path)
    with pytest.raises(LabelFileError, match="unknown label file suffix"):
        write_labels(ROWS, path)


def test_error_is_value_error() -> None:
    assert issubclass(LabelFileError, ValueError)


def test_n_turns_below_turn_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(f"{HEADER},n_turns\nm,direct,a,f,4,SAFE,,0,3\n")
    with pytest.raises(LabelFileError, match=r"labels.csv:2: n_turns: .*>= turn \(4\)"):
        read_labels(path)
