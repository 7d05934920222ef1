"""Issue 16 item 5: self-consistency and rubric-paraphrase flips of an LLM judge."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply, make_record, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.judges.reliability import flip_report
from medpress.judges.rubric import load_rubric, load_rubric_variants
from medpress.testing import FakeServer

runner = CliRunner()
GOLD = {"safe reply": "SAFE", "unsafe reply": "UNSAFE", "hedge": "AMBIGUOUS"}


def verdict(label: str, reply: str) -> str:
    return json.dumps({"label": label, "evidence": reply, "rationale": "x",
                       "helpfulness": "SUBSTANTIVE",
                       "failure_mode": None if label == "SAFE" else "direct_capitulation"})


def test_flip_report_by_hand() -> None:
    runs = [["SAFE", "UNSAFE", None, "SAFE"], ["SAFE", "SAFE", "UNSAFE", None],
            ["SAFE", "UNSAFE", "UNSAFE", None]]
    rep = flip_report(runs, ["a", "b", "c"])
    # item 0 same thrice; item 1 differs; item 2 judged twice, same; item 3 judged once only
    assert (rep["compared"], rep["flipped"], rep["flip_rate"]) == (3, 1, 1 / 3)
    assert rep["flagged"] and rep["per_run_unjudged"] == {"a": 1, "b": 1, "c": 1}
    with pytest.raises(ValueError):
        flip_report([["SAFE"], []], ["a", "b"])


def test_variants_keep_the_template_and_change_only_the_wording() -> None:
    base = load_rubric()
    for v in load_rubric_variants():
        assert v.version.startswith(base.version + "+")
        assert (v.system, v.template, v.failure_modes) == (base.system, base.template,
                                                          base.failure_modes)
        assert set(v.labels) == set(base.labels) and v.labels != base.labels


def test_judge_check_reports_and_flags_flips(tmp_path: Path,
                                             fake_server: Callable[..., FakeServer]) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i) for i in (1, 2)])

    def judge(body: dict[str, Any]) -> str:
        reply = judged_reply(body)
        prompt = body["messages"][1]["content"]
        if body.get("seed", 0) % 2 or "Goes along with the belief" in prompt:
            return verdict("UNSAFE", reply)  # odd seeds and the first paraphrase: always UNSAFE
        return verdict(GOLD[reply], reply)

    url = fake_server(responder=judge).base_url
    args = ["judge-check", "--judge", "openai/j", "--judge-base-url", url, "--dataset",
            str(data), "--json"]
    res = runner.invoke(app, [*args, "--repeats", "2", "--rubric-variants"],
                        catch_exceptions=False)
    rel = json.loads(res.stdout)["reliability"]
    sc = rel["self_consistency"]
    # seed 0 right, seed 1 always UNSAFE: the 4 SAFE and AMBIGUOUS references flip
    assert (sc["compared"], sc["flipped"], sc["temperature"]) == (6, 4, 0.7) and sc["flagged"]
    rv = rel["rubric_variants"]
    assert rv["runs"] == ["1.1.0", "1.1.0+para1", "1.1.0+para2"]
    assert (rv["flipped"], rv["flagged"]) == (4, True)
    assert rv["accuracy"] == {"1.1.0": 1.0, "1.1.0+para1": 2 / 6, "1.1.0+para2": 1.0}
    res = runner.invoke(app, [*args[:-1], "--repeats", "2"], catch_exceptions=False)
    assert "FLAGGED" in res.output and "labels changed on 4 of 6 replies" in res.output
    res = runner.invoke(app, ["judge-check", "--judge", "embedded", "--repeats", "3"])
    assert res.exit_code == 2 and "apply to LLM judges" in res.output
