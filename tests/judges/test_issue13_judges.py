"""Issue 13, items 8 and 10: LLM judge settings and failure reasons; judge-check context."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply, make_record, write_jsonl
from typer.testing import CliRunner

from medpress.backends import GenerateConfig, ScriptedBackend
from medpress.cli import app
from medpress.conditions import load_conditions
from medpress.dataset import Dataset, load_dataset, load_shipped
from medpress.judges import GoldFileError, JudgeItem, Judgment, get_judge, label_file_items
from medpress.judges.llm import LLMJudge, error_kind, failure_line
from medpress.judges.registry import parse_judge_reasoning
from medpress.judges.rubric import load_rubric
from medpress.runner import RunPlan, generate
from medpress.store import RunStore
from medpress.testing import FakeServer

runner = CliRunner()
FAMS = ["medication_treatment", "self_care", "symptom_triage"]
CARD = {"unsafe_belief": "b", "safe_stance": "s", "urgency": "urgent"}
PACKAGED_HELD_OUT = (Path(__file__).resolve().parents[2] / "src" / "medpress" / "judges"
                     / "embedded" / "data" / "smollm2_heldout.jsonl")
SECOND = Path(__file__).resolve().parents[2] / "labels" / "smollm2_heldout_second.jsonl"


def verdict(body: dict[str, Any]) -> str:
    reply = judged_reply(body)
    return json.dumps({"label": "SAFE", "failure_mode": None, "evidence": reply[:20],
                       "rationale": "x", "helpfulness": "SUBSTANTIVE"})


def thinking_judge(body: dict[str, Any]) -> str | dict[str, Any]:
    """Qwen3 behind vLLM with a reasoning parser: it thinks unless told not to, and its
    thought fills any budget, leaving no answer."""
    if body.get("chat_template_kwargs", {}).get("enable_thinking", True):
        return {"content": None, "reasoning_content": "hmm " * body["max_tokens"],
                "finish_reason": "length"}
    return verdict(body)


def out(res: Any) -> str:
    """CLI output on one line (rich wraps at the terminal width)."""
    return " ".join(res.output.split())


def run_once(judge: LLMJudge, reply: str = "a reply") -> Judgment:
    async def go() -> Judgment:
        try:
            return await judge.judge(JudgeItem("k", CARD, [("u", None)], reply))
        finally:
            await judge.aclose()
    return asyncio.run(go())


# -- item 8: settings ---------------------------------------------------------------------

def test_judge_settings_reach_the_request_and_the_judge_identity(
    fake_server: Callable[..., FakeServer]
) -> None:
    server = fake_server(responder=verdict)
    version = load_rubric().version
    default = get_judge("openai/j", base_url=server.base_url)
    assert default.rubric_version == version  # runs judged before the options still resume
    assert run_once(default).label == "SAFE"  # type: ignore[arg-type]
    assert server.requests[-1]["max_tokens"] == 512
    assert "chat_template_kwargs" not in server.requests[-1]

    tuned = get_judge("openai/j", base_url=server.base_url, reasoning="off", max_tokens=1024)
    assert tuned.rubric_version == f"{version}+r=off,mt=1024"
    assert run_once(tuned).label == "SAFE"  # type: ignore[arg-type]
    assert server.requests[-1]["max_tokens"] == 1024
    assert server.requests[-1]["chat_template_kwargs"] == {"enable_thinking": False}
    assert get_judge("openai/j", base_url=server.base_url,
                     max_tokens=2048).rubric_version == f"{version}+mt=2048"
    assert get_judge("openai/j", base_url=server.base_url,
                     reasoning="on").rubric_version == f"{version}+r=on"


def test_settings_are_refused_where_they_cannot_apply() -> None:
    with pytest.raises(ValueError, match="not to the embedded judge"):
        get_judge("embedded", reasoning="off")
    with pytest.raises(ValueError, match="not to the embedded judge"):
        get_judge("embedded", max_tokens=100)
    with pytest.raises(ValueError, match="no way to switch reasoning"):
        get_judge("scripted/always_safe", reasoning="off")
    with pytest.raises(ValueError, match="at least 1"):
        get_judge("scripted/always_safe", max_tokens=0)
    with pytest.raises(ValueError, match="'on' or 'off'"):
        parse_judge_reasoning("maybe")
    res = runner.invoke(app, ["judge-check", "--judge", "embedded", "--judge-reasoning", "off"])
    assert res.exit_code == 2 and "not to the embedded judge" in out(res)


# -- item 8: why verdicts failed -----------------------------------------------------------

def test_cut_off_verdicts_say_so_in_their_error(fake_server: Callable[..., FakeServer]) -> None:
    judge = get_judge("openai/j", base_url=fake_server(responder=thinking_judge).base_url)
    j = run_once(judge)  # type: ignore[arg-type]
    assert j.label is None and j.error is not None
    assert "empty answer after reasoning" in j.error
    assert "cut off at max_tokens=512 (finish_reason length)" in j.error
    # a server that says nothing of finish_reason: a full budget is taken as the sign
    full = fake_server(responder=lambda b: "<think> " + "x " * b["max_tokens"])
    j = run_once(get_judge("openai/j", base_url=full.base_url))  # type: ignore[arg-type]
    assert j.error is not None and "(finish_reason length?)" in j.error


def test_failure_line_groups_reasons_and_stays_quiet_below_two_percent() -> None:
    def failed(error: str, raw: str = "") -> Judgment:
        return Judgment("k", None, raw=raw, error=error, attempts=3)

    ok = [Judgment("k", "SAFE")] * 97
    cut = ("no valid verdict after 3 attempts: empty output (cut off at max_tokens=512 "
           "(finish_reason length))")
    api = ["judge API error: HTTP 500: {\"a\": 1} (after 7 attempts)",
           "judge API error: HTTP 500: other body (after 7 attempts)"]
    assert error_kind(api[0]) == error_kind(api[1]) == "judge API error: HTTP 500"
    assert error_kind(cut).startswith("no valid verdict: empty output")
    assert failure_line([*ok, failed(api[0])]) is None  # 1 of 98: noise
    line = failure_line([*ok, failed(cut), failed(cut), failed(api[0]), failed(api[1])])
    assert line is not None
    assert line.startswith("4 of 101 verdicts failed: 2 'no valid verdict: empty output")
    assert "2 'judge API error: HTTP 500'" in line
    assert "--judge-max-tokens" in line and "--judge-reasoning off" in line
    # bad JSON is not a cut-off: no such advice
    bad = failed("no valid verdict after 3 attempts: no JSON object found", raw="nonsense")
    line = failure_line([*ok, bad, bad, bad])
    assert line is not None and "--judge-max-tokens" not in line
    # replies never put to the judge (attempts 0) are not verdicts
    skipped = Judgment("k", None, error="not judged: empty reply", attempts=0)
    assert failure_line([*ok, *[skipped] * 10]) is None
    assert failure_line([]) is None


@pytest.fixture
def scripted_run(tmp_path: Path) -> tuple[Path, Path]:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 5)])
    rd = tmp_path / "run"
    store = RunStore(rd)
    plan = RunPlan(load_dataset(data), load_conditions().get(["direct"]), GenerateConfig())
    asyncio.run(generate(ScriptedBackend("caves_at_3"), store, plan))
    store.close()
    return rd, data


def test_judge_cli_explains_failures_and_records_settings(
    scripted_run: tuple[Path, Path], fake_server: Callable[..., FakeServer]
) -> None:
    rd, data = scripted_run
    url = fake_server(responder=thinking_judge).base_url
    base = ["judge", str(rd), "--judge", "openai/qwen", "--judge-base-url", url,
            "--dataset", str(data)]
    res = runner.invoke(app, base, catch_exceptions=False)
    text = out(res)
    assert res.exit_code == 1, text  # nothing could be judged
    assert "20 of 20 verdicts failed: 20 'no valid verdict: empty output (empty answer after " \
           "reasoning; cut off at max_tokens=512 (finish_reason length))'" in text
    assert "--judge-max-tokens" in text and "--judge-reasoning off" in text

    res = runner.invoke(app, [*base, "--judge-reasoning", "off", "--judge-max-tokens", "1024"],
                        catch_exceptions=False)
    assert res.exit_code == 0 and "verdicts failed" not in out(res)
    store = RunStore.open_existing(rd)
    version = load_rubric().version
    tuned_rows = [j for j in store.iter_judgments("openai/qwen")
                  if j["rubric_version"] == f"{version}+r=off,mt=1024"]
    assert len(tuned_rows) == 20 and all(j["label"] == "SAFE" for j in tuned_rows)
    assert {v for j, v in store.judges()} == {version, f"{version}+r=off,mt=1024"}
    judges = store.get_meta("judges")
    tuned = judges[f"openai/qwen@{version}+r=off,mt=1024"]
    assert tuned["settings"]["reasoning"] == "off" and tuned["settings"]["max_tokens"] == 1024
    assert judges[f"openai/qwen@{version}"]["settings"]["max_tokens"] == 512
    assert store.provenance()["judges"] == judges  # so every report shows them


def test_run_refuses_embedded_settings_before_generating(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(1)])
    rd = tmp_path / "run"
    res = runner.invoke(app, ["run", "-m", "scripted/always_safe", "--judge", "embedded",
                              "--judge-max-tokens", "100", "--dataset", str(data),
                              "--run-dir", str(rd)])
    assert res.exit_code == 2 and "not to the embedded judge" in out(res)
    assert not (rd / "run.sqlite").exists()


# -- item 10: judge-check sees the real earlier replies ------------------------------------

@pytest.fixture
def one_set(tmp_path: Path) -> Dataset:
    return load_dataset(write_jsonl(tmp_path / "d.jsonl", [make_record(1), make_record(2)]))


def row(turn: int, reply: str, **extra: Any) -> dict[str, Any]:
    return {"id": f"{extra.pop('tag', 'c')}-t{turn}", "dialogue_id": "MT-0001", "turn": turn,
            "reply": reply, "label": "AMBIGUOUS", **extra}


def test_labels_file_history_and_conversation_give_the_real_context(
    tmp_path: Path, one_set: Dataset
) -> None:
    rows = [row(1, "r1", conversation="c"), row(2, "r2", conversation="c"),
            row(3, "r3", conversation="c"),
            row(3, "x3", tag="h", history=["h1", {"user": "my own words", "assistant": "h2"}]),
            row(2, "y2", tag="alone"),                      # no history: reference stands in
            row(3, "z3", tag="gap", conversation="gap")]    # turns 1-2 missing: likewise
    items = {str(g.item.key): g for g in label_file_items(write_jsonl(tmp_path / "l.jsonl", rows),
                                                          one_set)}
    turns = [t.text for t in one_set.dialogues[0].turns]
    assert items["c-t3"].item.history == [(turns[0], "r1"), (turns[1], "r2"), (turns[2], None)]
    assert items["h-t3"].item.history == [(turns[0], "h1"), ("my own words", "h2"),
                                          (turns[2], None)]
    assert items["alone-t2"].item.history == [(turns[0], "safe reply"), (turns[1], None)]
    assert items["gap-t3"].item.history[0] == (turns[0], "safe reply")
    assert {k for k, g in items.items() if g.stand_in} == {"alone-t2", "gap-t3"}
    assert not items["c-t1"].stand_in  # turn 1 has no earlier reply to stand in for


@pytest.mark.parametrize(("bad", "why"), [
    ({"history": ["only one"]}, "history: must be a list of the 2 earlier replies"),
    ({"history": ["h1", {"user": "u"}]}, "history: entry 2 must be a string or an object"),
])
def test_bad_history_is_named_by_line_and_field(
    tmp_path: Path, one_set: Dataset, bad: dict[str, Any], why: str
) -> None:
    path = write_jsonl(tmp_path / "l.jsonl", [row(3, "x", **bad)])
    with pytest.raises(GoldFileError, match=re.escape(f"l.jsonl:1: {why}")):
        label_file_items(path, one_set)


def test_a_conversation_turn_twice_is_an_error(tmp_path: Path, one_set: Dataset) -> None:
    path = write_jsonl(tmp_path / "l.jsonl", [row(1, "a", conversation="c"),
                                              row(1, "b", tag="d", conversation="c")])
    with pytest.raises(GoldFileError, match=re.escape("l.jsonl:2: conversation: turn 1 of 'c'")):
        label_file_items(path, one_set)


def test_shipped_labels_carry_every_earlier_reply() -> None:
    ds = load_shipped()
    for path in (PACKAGED_HELD_OUT, SECOND):
        items = label_file_items(path, ds)
        assert items and not any(g.stand_in for g in items), path
    # and it is the model's own reply the judge sees, e.g. turn 2 of the first conversation
    first = {str(g.item.key): g for g in label_file_items(PACKAGED_HELD_OUT, ds)}
    t1, t2 = first["smollm2-direct-MT-0026-t1"], first["smollm2-direct-MT-0026-t2"]
    assert t2.item.history[0][1] == t1.item.reply


def test_judge_check_judges_in_the_real_context_and_counts_stand_ins(
    tmp_path: Path, one_set: Dataset, fake_server: Callable[..., FakeServer]
) -> None:
    server = fake_server(responder=verdict)
    labels = write_jsonl(tmp_path / "l.jsonl", [
        row(1, "r1", conversation="c"), row(2, "r2", conversation="c"), row(2, "y2", tag="a")])
    args = ["judge-check", "--judge", "openai/j", "--judge-base-url", server.base_url,
            "--labels", str(labels), "--dataset", str(one_set.paths[0])]
    res = runner.invoke(app, args, catch_exceptions=False)
    assert "context: reference replies stand in for earlier turns in 1 items" in out(res)
    prompts = {judged_reply(b): b["messages"][1]["content"] for b in server.requests}
    assert "r1" in prompts["r2"] and "safe reply" not in prompts["r2"]
    assert "safe reply" in prompts["y2"]
    res = runner.invoke(app, [*args, "--json"], catch_exceptions=False)
    assert json.loads(res.stdout)["sets"]["l.jsonl"]["reference_context_items"] == 1
