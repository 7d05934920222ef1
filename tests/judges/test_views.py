"""Label views: judge identity across rubric versions, the default view, labels import."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from medpress.backends import GenerateConfig, ScriptedBackend
from medpress.conditions import load_conditions
from medpress.dataset import Dataset
from medpress.judges import IMPORT_VERSION, import_labels, judge_run, label_rows, resolve_view
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.runner import RunPlan, generate
from medpress.store import RunStore


@pytest.fixture
def store(tmp_path: Path, small_set: Dataset) -> RunStore:
    store = RunStore(tmp_path / "run")
    plan = RunPlan(small_set, load_conditions().get(["direct"]), GenerateConfig())
    asyncio.run(generate(ScriptedBackend("always_safe"), store, plan))
    return store


def label_all(store: RunStore, judge: str, version: str, label: str | None,
              created_at: float) -> None:
    for t in store.iter_turns():
        store.add_judgment({"condition": t["condition"], "repeat": t["repeat"],
                            "dialogue_id": t["dialogue_id"], "turn": t["turn"], "judge": judge,
                            "rubric_version": version, "label": label,
                            "created_at": created_at})


def test_newest_rubric_version_is_used_alone_and_named(store: RunStore) -> None:
    # The embedded judge was re-trained (new version) after a first labelling: the old and new
    # labels must never be mixed, whatever order SQLite returns them in.
    label_all(store, "embedded", "v2+new", "UNSAFE", created_at=2.0)
    label_all(store, "embedded", "v1+old", "SAFE", created_at=1.0)
    rows, desc = label_rows(store)
    assert {r.label for r in rows} == {"UNSAFE"}
    assert "v2+new" in desc and "v1+old" in desc and "not used" in desc
    old, desc_old = label_rows(store, "embedded@v1+old")
    assert {r.label for r in old} == {"SAFE"} and "v1+old" in desc_old
    with pytest.raises(ValueError, match=r"versions present: v1\+old, v2\+new"):
        label_rows(store, "embedded@v3")


def test_default_view_refuses_to_guess_between_judges(store: RunStore) -> None:
    label_all(store, "openai/qwen", "rubric-1", "SAFE", created_at=1.0)
    label_all(store, "alice", IMPORT_VERSION, "UNSAFE", created_at=2.0)
    with pytest.raises(ValueError, match=r"several judges.*alice \(imported labels\).*"
                       r"openai/qwen.*--judge ensemble"):
        label_rows(store)
    # ensemble leaves imported human labels out; naming them includes them.
    assert resolve_view(store, "ensemble").judges == (("openai/qwen", "rubric-1"),)
    rows, desc = label_rows(store, "alice,openai/qwen")
    assert {r.label for r in rows} == {"UNSAFE"}  # the tie goes to the more severe label
    assert desc.startswith("ensemble (majority of alice (imported labels), openai/qwen")


def test_no_judge_gives_unjudged_rows(store: RunStore) -> None:
    rows, desc = label_rows(store)
    assert rows and all(r.label is None for r in rows) and desc.startswith("none")


def write_labels_file(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_labels_import_checks_model_and_reimports_blank_labels(
    store: RunStore, tmp_path: Path
) -> None:
    base = {"condition": "direct", "dialogue_id": "MT-0001", "family": "medication_treatment"}
    f = write_labels_file(tmp_path / "l.jsonl", [
        {**base, "model": "scripted/always_safe", "turn": 1, "label": "SAFE"},
        {**base, "model": "scripted/always_safe", "turn": 2, "label": ""},
        {**base, "model": "openai/other", "turn": 3, "label": "UNSAFE"},
    ])
    first = import_labels(store, f, "alice")
    assert (first.added, first.other_model) == (2, 1)
    again = import_labels(store, f, "alice")  # crashed with an IntegrityError before
    assert (again.added, again.kept_existing) == (0, 2)
    labels = {j["turn"]: j["label"] for j in store.iter_judgments("alice")}
    assert labels == {1: "SAFE", 2: None}  # the other model's row was not imported
    other = write_labels_file(tmp_path / "o.jsonl", [
        {**base, "model": "openai/other", "turn": 1, "label": "SAFE"}])
    with pytest.raises(ValueError, match=r"no row is for this run's model.*openai/other"):
        import_labels(store, other, "alice")


class EmptyAwareJudge(Judge):
    """Labels every reply it is shown SAFE, and remembers what it was shown."""

    name = "seen"
    rubric_version = "test"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def judge(self, item: JudgeItem) -> Judgment:
        self.seen.append(item.reply)
        return Judgment(item.key, "SAFE")


def test_empty_and_truncated_replies_are_not_labelled(store: RunStore, small_set: Dataset) -> None:
    store.conn.execute("UPDATE turns SET reply = '' WHERE dialogue_id = 'MT-0001' AND turn = 2")
    store.conn.execute("UPDATE turns SET finish_reason = 'length' "
                       "WHERE dialogue_id = 'SC-0002' AND turn = 4")
    judge = EmptyAwareJudge()
    summary = asyncio.run(judge_run(store, small_set, judge, judge_truncated=False))
    assert "" not in judge.seen and len(judge.seen) == 28
    assert dict(summary.not_judged) == {"empty": 1, "truncated": 1}
    errors = {(j["dialogue_id"], j["turn"]): j["error"]
              for j in store.iter_judgments("seen") if j["label"] is None}
    assert errors == {("MT-0001", 2): "not judged: empty reply",
                      ("SC-0002", 4): "not judged: truncated reply"}
    # The user's flag: truncated replies are judged by default.
    store.conn.execute("DELETE FROM judgments")
    judge = EmptyAwareJudge()
    summary = asyncio.run(judge_run(store, small_set, judge))
    assert len(judge.seen) == 29 and dict(summary.not_judged) == {"empty": 1}
