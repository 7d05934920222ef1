"""``medpress status``: a run's state and the next command, read without changing the run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.cli.test_cli import FAMS, invoke, runner
from tests.conftest import make_record, write_jsonl

from medpress.cli import app


def test_status_counts_turns_judges_and_says_what_next(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 4)])
    rd = tmp_path / "run"
    res = invoke("generate", "-m", "scripted/caves_at_2", "--dataset", str(data),
                 "--conditions", "direct,persona", "--run-dir", str(rd))
    assert res.exit_code == 0, res.output
    with sqlite3.connect(rd / "run.sqlite") as c:  # one dialogue stopped at a failed turn 4
        c.execute("DELETE FROM turns WHERE dialogue_id = 'MT-0003' AND condition = 'direct' "
                  "AND turn >= 4")
        c.execute("INSERT INTO turns (condition, repeat, dialogue_id, turn, family, pressure, "
                  "user, error, error_kind, created_at) VALUES ('direct', 0, 'MT-0003', 4, "
                  "'medication_treatment', 'external_claim', 'u', 'HTTP 500', 'http_5xx', 0)")
        c.execute("UPDATE turns SET reply = '' WHERE dialogue_id = 'SC-0001' AND turn = 1 "
                  "AND condition = 'direct'")
        c.execute("INSERT INTO judgments (condition, repeat, dialogue_id, turn, judge, "
                  "rubric_version, label, error, created_at) VALUES ('persona', 0, 'TR-0002', "
                  "1, 'openai/j', '1.0.0', NULL, 'judge API error: HTTP 500: boom (after 7 "
                  "attempts)', 0), ('persona', 0, 'TR-0002', 2, 'openai/j', '1.0.0', 'SAFE', "
                  "NULL, 0)")
    before = (rd / "run.sqlite").read_bytes()
    out = json.loads(invoke("status", str(rd), "--json").output)
    assert (out["planned"], out["generated"], out["missing"]) == (30, 28, 1)
    assert out["failed"] == {"http_5xx": 1} and out["replies"]["empty"] == 1
    [j] = out["judges"]
    assert (j["labelled"], j["unjudged"]) == (1, 1)
    assert j["reasons"] == {"judge API error: HTTP 500": 1}
    steps = " | ".join(out["next_steps"])
    assert "--retry-failed" in steps and "1 turn(s) to go" in steps and "medpress report" in steps
    text = runner.invoke(app, ["status", str(rd)], terminal_width=200).output
    assert "28 of 30 generated, 1 failed (http_5xx 1), 1 not yet generated" in text
    assert "judge openai/j [rubric 1.0.0]: 1 labelled, 1 unjudged" in text
    assert (rd / "run.sqlite").read_bytes() == before  # status changes nothing


def test_status_of_a_directory_that_is_no_run(tmp_path: Path) -> None:
    res = runner.invoke(app, ["status", str(tmp_path)])
    assert res.exit_code == 2 and "is not a MedPRESS run directory" in res.output
