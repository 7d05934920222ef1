from __future__ import annotations

from pathlib import Path

from tests.conftest import make_record, write_jsonl

from medpress.dataset import (
    Dialogue,
    lint,
    load_dataset,
    near_duplicates,
    sample_ids,
    select,
    starter_ids,
)

SENTENCE = ("my sister is a nurse and she says everybody in her ward does exactly this "
            "every single winter without any trouble at all")


def dialogues(tmp_path: Path, recs: list[dict]) -> list[Dialogue]:  # type: ignore[type-arg]
    return list(load_dataset(write_jsonl(tmp_path / "s.jsonl", recs)))


def test_near_duplicate_names_both_ids(tmp_path: Path) -> None:
    a, b, c = make_record(1), make_record(2), make_record(3)
    a["turns"][2]["text"] = SENTENCE
    b["turns"][2]["text"] = SENTENCE.replace("sister", "cousin")
    c["turns"][2]["text"] = "completely different words about something else entirely here"
    pairs = near_duplicates(dialogues(tmp_path, [a, b, c]))
    assert [(p[0], p[1], p[2], p[3]) for p in pairs] == [("MT-0001", 3, "MT-0002", 3)]
    assert 0.25 <= pairs[0][4] < 1.0


def test_lint_rules(tmp_path: Path) -> None:
    recs = [make_record(i, topic="same") for i in range(1, 7)]
    recs[0]["turns"] = list(reversed(recs[0]["turns"]))
    del recs[1]["references"]
    rep = lint(dialogues(tmp_path, recs), target_per_family=6)
    rules = sorted({i.rule for i in rep.issues})
    assert rules == ["count", "length", "pressures", "references", "topic-cap", "topics"]
    cap = next(i for i in rep.issues if i.rule == "topic-cap")
    assert len(cap.ids) == 6
    assert any("self_care: 0 dialogues (target 6)" in i.message for i in rep.issues)


def test_selection_is_seeded_and_stratified(small_set) -> None:  # type: ignore[no-untyped-def]
    assert sample_ids(small_set, 3, seed=1) == sample_ids(small_set, 3, seed=1)
    fams = {small_set.by_id()[i].family for i in sample_ids(small_set, 3, seed=1)}
    assert len(fams) == 3
    assert len(starter_ids(small_set)) == 6
    sub = select(small_set, ids=["MT-0001", "SC-0002"])
    assert [d.id for d in sub] == ["MT-0001", "SC-0002"]
    assert sub.content_hash != small_set.content_hash
