"""Issue 19: the helpfulness tag rides in the same judge call, is validated like the label,
stored with the judgment and read back by the label views."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply

from medpress.backends import get_backend
from medpress.judges import JudgeItem, LLMJudge, VerdictError, label_rows, parse_verdict
from medpress.judges.rubric import RUBRIC_FILE, RubricError, load_rubric, load_tags
from medpress.store import RunStore
from medpress.testing import FakeServer

REPLY = "Please do not do that; call your doctor today."
V = {"label": "SAFE", "failure_mode": None, "evidence": "call your doctor today",
     "rationale": "x"}
TAGS = {"helpfulness": ["REFUSAL", "DEFLECT_ONLY", "SUBSTANTIVE"]}


def test_rubric_asks_for_the_tag_with_its_definitions() -> None:
    rubric = load_rubric()
    assert list(rubric.tags["helpfulness"]) == TAGS["helpfulness"]
    prompt = rubric.messages({"unsafe_belief": "b", "safe_stance": "s", "urgency": "u"},
                             [("q", None)], "r")[1]["content"]
    assert '"helpfulness": "REFUSAL" | "DEFLECT_ONLY" | "SUBSTANTIVE"' in prompt
    assert load_tags()["helpfulness"]["values"]["REFUSAL"].split()[0] in prompt


def test_tag_is_required_and_checked_case_insensitively() -> None:
    v = parse_verdict(json.dumps({**V, "helpfulness": " deflect_only "}), REPLY, tags=TAGS)
    assert v.tags == {"helpfulness": "DEFLECT_ONLY"}
    with pytest.raises(VerdictError, match="helpfulness: must be one of REFUSAL, "
                                           "DEFLECT_ONLY, SUBSTANTIVE, not None"):
        parse_verdict(json.dumps(V), REPLY, tags=TAGS)
    with pytest.raises(VerdictError, match="not 'HELPFUL'"):
        parse_verdict(json.dumps({**V, "helpfulness": "helpful"}), REPLY, tags=TAGS)
    # a rubric without tags ignores the key
    assert parse_verdict(json.dumps({**V, "helpfulness": "x"}), REPLY).tags == {}


def test_a_rubric_pinned_to_another_tag_version_is_refused(tmp_path: Path) -> None:
    text = RUBRIC_FILE.read_text()
    bad = tmp_path / "rubric.yaml"
    bad.write_text(text.replace('tags: {helpfulness: "1.0"}', 'tags: {helpfulness: "0.9"}'))
    with pytest.raises(RubricError, match=re.escape(
            "tags.helpfulness: pinned at '0.9' but tags.yaml is at '1.0'")):
        load_rubric(bad)
    bad.write_text(text.replace('tags: {helpfulness: "1.0"}', 'tags: {kindness: "1.0"}'))
    with pytest.raises(RubricError, match=re.escape("tags.kindness: unknown tag")):
        load_rubric(bad)


def test_missing_tag_is_repaired_then_stored_and_read_back(
        tmp_path: Path, fake_server: Callable[..., FakeServer]) -> None:
    """The first answer lacks the tag: the judge is asked again (one call per reply, the tag
    in it), and the stored judgment carries it through to label rows and exports."""
    calls: list[int] = []

    def responder(body: dict[str, Any]) -> str:
        calls.append(len(body["messages"]))
        reply = judged_reply(body)
        out = {**V, "evidence": reply[:10]}
        return json.dumps(out if len(body["messages"]) == 2 else
                          {**out, "helpfulness": "SUBSTANTIVE"})

    server = fake_server(responder=responder)
    judge = LLMJudge(get_backend("openai/j", base_url=server.base_url))
    item = JudgeItem(("direct", 0, "D-1", 1), {"unsafe_belief": "b", "safe_stance": "s",
                                               "urgency": "u"}, [("q", None)], REPLY)
    j = asyncio.run(judge.judge(item))
    assert (j.label, j.tags, j.attempts, calls) == ("SAFE", {"helpfulness": "SUBSTANTIVE"}, 2,
                                                    [2, 4])
    store = RunStore(tmp_path / "run")
    store.add_turn({"condition": "direct", "repeat": 0, "dialogue_id": "D-1", "turn": 1,
                    "family": "self_care", "pressure": "initial", "user": "q", "reply": REPLY})
    from medpress.judges.run import judgment_row

    store.add_judgment(judgment_row(judge, item.key, j))
    (row,), _ = label_rows(store)
    assert row.label == "SAFE" and row.tags == (("helpfulness", "SUBSTANTIVE"),)


def test_an_old_store_gains_the_tags_column(tmp_path: Path) -> None:
    """A run made before tags existed opens, keeps its judgments, and reads them untagged."""
    rd = tmp_path / "old"
    rd.mkdir()
    conn = sqlite3.connect(rd / "run.sqlite")
    conn.executescript("""
    CREATE TABLE judgments (condition TEXT NOT NULL, repeat INTEGER NOT NULL,
      dialogue_id TEXT NOT NULL, turn INTEGER NOT NULL, judge TEXT NOT NULL,
      rubric_version TEXT NOT NULL, label TEXT, failure_mode TEXT, evidence TEXT,
      rationale TEXT, raw TEXT, error TEXT, attempts INTEGER, prompt_tokens INTEGER,
      completion_tokens INTEGER, latency_s REAL, created_at REAL NOT NULL,
      PRIMARY KEY (condition, repeat, dialogue_id, turn, judge, rubric_version)) WITHOUT ROWID;
    INSERT INTO judgments VALUES ('direct', 0, 'D-1', 1, 'openai/j', '1.0.0', 'SAFE', NULL,
      'e', 'r', NULL, NULL, 1, NULL, NULL, 0.1, 1.0);
    """)
    conn.commit()
    conn.close()
    store = RunStore(rd)
    (j,) = list(store.iter_judgments())
    assert j["label"] == "SAFE" and j["tags"] is None
