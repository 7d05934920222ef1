from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import EXAMPLE, make_record, write_jsonl

from medpress.dataset import DatasetError, dump_jsonl, dump_yaml, load_dataset


def problems_for(tmp_path: Path, mutate: Any, name: str = "bad.jsonl") -> list[str]:
    rec = make_record(1)
    mutate(rec)
    path = write_jsonl(tmp_path / name, [make_record(2), rec])
    with pytest.raises(DatasetError) as e:
        load_dataset(path)
    return [str(p) for p in e.value.problems]


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda r: r.update(family="dentistry"), "family", "unknown family 'dentistry'"),
        (lambda r: r.pop("safe_stance"), "safe_stance", "missing required field"),
        (lambda r: r.update(rationale="  "), "rationale", "must not be empty"),
        (lambda r: r.update(turns=[]), "turns", "empty turn list"),
        (lambda r: r["turns"][2].update(text=42), "turns.2.text", "must be a string, got int"),
        (lambda r: r.update(urgency="soonish"), "urgency", "bad urgency 'soonish'"),
        (lambda r: r.update(id="MT-0002"), "id", "duplicate id (first at"),
    ],
)
def test_each_error_names_file_line_id_field(tmp_path: Path, mutate: Any, field: str,
                                             words: str) -> None:
    msgs = problems_for(tmp_path, mutate)
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith(f"{tmp_path / 'bad.jsonl'}:2 ")
    assert "[MT-000" in msgs[0]
    assert f" {field}: " in msgs[0]
    assert words in msgs[0]


def test_errors_collected_across_files_and_bad_json(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(make_record(1)) + "\n{not json\n")
    b = make_record(3)
    b["urgency"] = "never"
    write_jsonl(tmp_path / "b.jsonl", [b])
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path)
    text = str(e.value)
    assert "a.jsonl:2 invalid JSON" in text
    assert "b.jsonl:1 [MT-0003] urgency: bad urgency 'never'" in text


def test_yaml_errors_carry_line_numbers(tmp_path: Path) -> None:
    good, bad = make_record(1), make_record(2)
    bad["family"] = "x"
    path = tmp_path / "set.yaml"
    dump_yaml([load_dataset(write_jsonl(tmp_path / "g.jsonl", [good])).dialogues[0]], path)
    first_len = len(path.read_text().splitlines())
    import yaml

    path.write_text(yaml.safe_dump([good, bad], sort_keys=False))
    with pytest.raises(DatasetError) as e:
        load_dataset(path)
    (p,) = e.value.problems
    assert p.line == first_len + 1 and p.field == "family"


def test_jsonl_yaml_round_trip_keeps_content_hash(tmp_path: Path) -> None:
    ex = json.loads(EXAMPLE.read_text())
    ds = load_dataset(write_jsonl(tmp_path / "a.jsonl", [ex, make_record(7, n_turns=3)]))
    dump_yaml(ds.dialogues, tmp_path / "b.yaml")
    dump_jsonl(load_dataset(tmp_path / "b.yaml").dialogues, tmp_path / "c.jsonl")
    back = load_dataset(tmp_path / "c.jsonl")
    assert back.dialogues == ds.dialogues
    assert back.content_hash == ds.content_hash


def test_several_files_and_directory(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [make_record(1)])
    (tmp_path / "sub").mkdir()
    write_jsonl(tmp_path / "sub" / "b.jsonl", [make_record(2)])
    assert len(load_dataset(tmp_path)) == 2
    assert len(load_dataset([tmp_path / "a.jsonl", tmp_path / "sub" / "b.jsonl"])) == 2


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file or directory"):
        load_dataset(tmp_path / "nope.jsonl")
