"""Issue 13 (runner and store): finish reasons stored and counted, old stores migrated, resume
refused on any prompt-shaping change, duplicate conditions refused, and a run whose first
request is refused for good stops at once and stays resumable."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from medpress.backends import (
    Backend,
    ChatRequest,
    ChatResult,
    GenerateConfig,
    OpenAIBackend,
    RetryPolicy,
    ScriptedBackend,
)
from medpress.conditions import DEFAULT_CONDITIONS, Condition, load_conditions
from medpress.dataset import Dataset
from medpress.runner import RunPlan, RunRejected, generate, resume_settings
from medpress.store import DB_NAME, RunStore, StoreError, reply_issue
from medpress.testing import FakeServer

FAST = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.05)
# The turns table as the first release created it, before finish_reason.
OLD_TURNS = """
CREATE TABLE turns (
    condition TEXT NOT NULL, repeat INTEGER NOT NULL, dialogue_id TEXT NOT NULL,
    turn INTEGER NOT NULL, family TEXT NOT NULL, pressure TEXT NOT NULL, user TEXT NOT NULL,
    reply TEXT, reasoning TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    latency_s REAL, error TEXT, error_kind TEXT, attempts INTEGER, retries TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (condition, repeat, dialogue_id, turn)
) WITHOUT ROWID;
"""


def plan(ds: Dataset, conds: Sequence[str] = ("direct",), **cfg: Any) -> RunPlan:
    return RunPlan(ds, load_conditions().get(conds), GenerateConfig(**cfg))


def turn_row(turn: int, reply: str | None, finish: str | None,
             error: str | None = None) -> dict[str, Any]:
    return {"condition": "direct", "repeat": 0, "dialogue_id": "MT-0001", "turn": turn,
            "family": "medication_treatment", "pressure": "initial", "user": "u",
            "reply": reply, "finish_reason": finish, "error": error}


# -- item 5: store side -----------------------------------------------------------------------
def test_reply_issue() -> None:
    assert reply_issue(None, "stop") == "empty"
    assert reply_issue(" \n\t", None) == "empty"
    assert reply_issue("", "length") == "empty"  # empty wins over truncated
    assert reply_issue("Half a rep", "length") == "truncated"
    assert reply_issue("Fine.", "stop") is None
    assert reply_issue("Fine.", None) is None  # old runs and silent backends


def test_reply_issues_count_successful_turns_only(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r")
    assert store.reply_issues() == {"empty": 0, "truncated": 0}
    rows = [("Fine.", "stop"), ("", "stop"), (None, None), ("\u00a0\n", "length"),
            ("Half", "length"), ("More", "length"), ("Ok", None)]
    for t, (reply, finish) in enumerate(rows, 1):
        store.add_turn(turn_row(t, reply, finish))
    store.add_turn(turn_row(99, None, None, error="HTTP 500"))  # failed: not a reply at all
    assert store.reply_issues() == {"empty": 3, "truncated": 2}


def test_old_store_gains_finish_reason_and_keeps_its_rows(tmp_path: Path) -> None:
    rd = tmp_path / "old"
    rd.mkdir()
    with sqlite3.connect(rd / DB_NAME) as c:
        c.executescript(OLD_TURNS)
        c.execute("INSERT INTO turns (condition, repeat, dialogue_id, turn, family, pressure, "
                  "user, reply, created_at) VALUES ('direct', 0, 'MT-0001', 1, 'f', 'p', 'u', "
                  "'old reply', 0)")
    store = RunStore.open_existing(rd)
    cols = {r[1] for r in store.conn.execute("PRAGMA table_info(turns)")}
    assert "finish_reason" in cols
    store.add_turn(turn_row(2, "cut", "length"))
    assert [(r["reply"], r["finish_reason"]) for r in store.iter_turns()] == [
        ("old reply", None), ("cut", "length")]
    assert store.reply_issues() == {"empty": 0, "truncated": 1}
    store.close()
    RunStore(rd).close()  # opening again is a no-op


@pytest.mark.parametrize(("behaviour", "issue"), [("empty", "empty"),
                                                  ("truncated", "truncated")])
def test_runner_stores_finish_reason_and_counts_issues(tmp_path: Path, small_set: Dataset,
                                                       behaviour: str, issue: str) -> None:
    store = RunStore(tmp_path / "r")
    summary = asyncio.run(generate(ScriptedBackend(behaviour), store, plan(small_set)))
    assert summary.reply_issues == {issue: 30} and summary.as_dict()["reply_issues"] == {issue: 30}
    assert store.reply_issues()[issue] == 30
    assert {r["finish_reason"] for r in store.iter_turns()} == {"length"}
    ok = RunStore(tmp_path / "ok")
    asyncio.run(generate(ScriptedBackend("always_safe"), ok, plan(small_set)))
    assert {r["finish_reason"] for r in ok.iter_turns()} == {"stop"}
    assert ok.reply_issues() == {"empty": 0, "truncated": 0}


# -- item 6: resume compares everything that shapes a prompt ----------------------------------
class Thinking(ScriptedBackend):
    """A scripted model that pretends it can switch reasoning."""

    reasoning_switch = True


def _direct(text: str | None = None, version: str | None = None) -> Condition:
    c = load_conditions().conditions["direct"]
    return replace(c, system=text or c.system, version=version or c.version)


@pytest.mark.parametrize(("change", "message"), [
    ("system_role", "--system-role: stored True, now False"),
    ("max_tokens", "--max-tokens: stored 384, now 128"),
    ("reasoning", "--reasoning: stored None, now 'on'"),
    ("temperature", "--temperature: stored 0.0, now 0.7"),
    ("condition_text", "condition text 'direct': stored '"),
    ("conditions_version", "conditions version: stored '1.0.0', now '9.9.9'"),
])
def test_resume_with_a_changed_setting_is_refused(tmp_path: Path, small_set: Dataset,
                                                  change: str, message: str) -> None:
    store = RunStore(tmp_path / "r")
    asyncio.run(generate(Thinking("hedger"), store, plan(small_set)))
    backend: Backend = Thinking("hedger", system_role=change != "system_role")
    cfg = {"max_tokens": {"max_tokens": 128}, "reasoning": {"reasoning": "on"},
           "temperature": {"temperature": 0.7}}.get(change, {})
    p = plan(small_set, **cfg)
    if change == "condition_text":
        p = replace(p, conditions=[_direct(text="Agree with the patient.")])
    if change == "conditions_version":
        p = replace(p, conditions=[_direct(version="9.9.9")])
    with pytest.raises(StoreError, match="refusing to resume") as e:
        asyncio.run(generate(backend, store, p))
    assert message in str(e.value)
    assert str(e.value).count("stored") == 1  # only what changed is named
    again = asyncio.run(generate(Thinking("hedger"), store, plan(small_set)))
    assert again.turns_done == 0 and again.turns_skipped == 30


def test_run_recorded_before_these_settings_still_resumes(tmp_path: Path,
                                                          small_set: Dataset) -> None:
    store = RunStore(tmp_path / "r")
    asyncio.run(generate(ScriptedBackend("hedger"), store, plan(small_set)))
    params = store.get_meta("params")
    del params["system_role"]
    conds = store.get_meta("conditions")
    del conds["template"]
    store.set_meta("params", params)
    store.set_meta("conditions", conds)
    assert resume_settings(store.provenance())["--system-role"] is True
    again = asyncio.run(generate(ScriptedBackend("hedger"), store, plan(small_set)))
    assert again.turns_skipped == 30
    with pytest.raises(StoreError, match="--system-role: stored True, now False"):
        asyncio.run(generate(ScriptedBackend("hedger", system_role=False), store,
                             plan(small_set)))


def test_template_is_compared_only_without_a_system_role(small_set: Dataset) -> None:
    p = plan(small_set)
    with_role = resume_settings(p.provenance(ScriptedBackend("hedger")))
    without = resume_settings(p.provenance(ScriptedBackend("hedger", system_role=False)))
    assert "no-system-role template" not in with_role
    assert without["no-system-role template"] == load_conditions().template_hash


def test_reasoning_the_backend_would_drop_is_refused_before_anything_is_stored(
    tmp_path: Path, small_set: Dataset
) -> None:
    store = RunStore(tmp_path / "r")
    with pytest.raises(ValueError, match="--reasoning off: scripted/hedger"):
        asyncio.run(generate(ScriptedBackend("hedger"), store, plan(small_set, reasoning="off")))
    assert store.get_meta("model") is None and store.count_turns() == 0


# -- item 12: a condition listed twice --------------------------------------------------------
def test_duplicate_conditions_are_refused_up_front(small_set: Dataset) -> None:
    with pytest.raises(ValueError, match="more than once in --conditions: direct"):
        load_conditions().get(["direct", "persona", "direct"])
    direct = load_conditions().conditions["direct"]
    with pytest.raises(ValueError, match="more than once"):
        RunPlan(small_set, [direct, direct], GenerateConfig())


# -- item 7: the first request refused for good -----------------------------------------------
def no_such_model(body: dict[str, Any]) -> str:
    return f"The model `{body['model']}` does not exist or you do not have access to it."


def test_first_request_refused_stops_the_run_and_leaves_it_resumable(
    fake_server: Callable[..., FakeServer], small_set: Dataset, tmp_path: Path
) -> None:
    bad = fake_server(reject=no_such_model)
    store = RunStore(tmp_path / "r")
    p = plan(small_set, DEFAULT_CONDITIONS)  # 24 dialogues, 120 turns
    with pytest.raises(RunRejected, match=r"openai/m refused the run's first request \(http_400\)"
                       r".*does not exist") as e:
        asyncio.run(generate(OpenAIBackend("m", base_url=bad.base_url, retry=FAST), store, p,
                             concurrency=3))
    assert e.value.result.error_kind == "http_400"
    assert len(bad.requests) <= 3  # only what was in flight, not 24 dialogues' worth
    assert store.count_turns() == 0  # nothing stored: a plain rerun starts every dialogue
    good = fake_server()
    summary = asyncio.run(generate(OpenAIBackend("m", base_url=good.base_url, retry=FAST),
                                   store, p, concurrency=3))
    assert summary.turns_done == 120 == store.count_turns() and summary.failed_turns == 0


def test_a_refused_later_turn_of_a_resumed_dialogue_does_not_stop_the_run(
    fake_server: Callable[..., FakeServer], small_set: Dataset, tmp_path: Path
) -> None:
    one = small_set.subset(["MT-0001"])
    store = RunStore(tmp_path / "r")
    good = fake_server()
    asyncio.run(generate(OpenAIBackend("m", base_url=good.base_url, retry=FAST), store,
                         plan(one)))
    store.conn.execute("DELETE FROM turns WHERE turn > 1")  # as if killed after turn 1
    # e.g. a prompt past the context length: refused, but only for this dialogue
    bad = fake_server(permanent_marker=one.dialogues[0].turns[1].text)
    summary = asyncio.run(generate(OpenAIBackend("m", base_url=bad.base_url, retry=FAST),
                                   store, plan(one)))
    assert summary.failures == {"http_400": 1} and store.unit_states()[
        ("direct", 0, "MT-0001")].failed


class Refusing(Backend):
    """Refuses every request with ``kind``, after ``ok_first`` good replies."""

    def __init__(self, kind: str = "http_401", ok_first: int = 0, batched: bool = False) -> None:
        self.spec = "test/refusing"
        self.kind = kind
        self.left_ok = ok_first
        self.batched = batched  # type: ignore[misc]

    async def complete(self, request: ChatRequest) -> ChatResult:
        if self.left_ok > 0:
            self.left_ok -= 1
            return ChatResult(request.key, "fine", finish_reason="stop")
        return ChatResult(request.key, None, error="HTTP 401: bad key", error_kind=self.kind)


def test_batched_first_refusal_also_stops(tmp_path: Path, small_set: Dataset) -> None:
    store = RunStore(tmp_path / "r")
    with pytest.raises(RunRejected, match="http_401"):
        asyncio.run(generate(Refusing(batched=True), store, plan(small_set)))
    assert store.count_turns() == 0


@pytest.mark.parametrize(("backend", "stored"), [
    (Refusing("http_5xx"), 6),  # a retryable kind that ran out of retries: per dialogue
    (Refusing("http_401", ok_first=1), 7),  # a refusal after a success: per dialogue
])
def test_other_failures_are_recorded_and_the_run_goes_on(tmp_path: Path, small_set: Dataset,
                                                         backend: Refusing, stored: int) -> None:
    store = RunStore(tmp_path / "r")
    summary = asyncio.run(generate(backend, store, plan(small_set), concurrency=1))
    assert summary.failed_turns == 6 and store.count_turns() == summary.turns_done == stored
