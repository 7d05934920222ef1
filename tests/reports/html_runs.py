"""Scripted runs for the report.html tests: two runs, labelled by the toy judge, with a second
judge that disagrees, an unjudged turn, reasoning text, and XSS payloads in user turns,
replies, a card and a run name."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import make_record, write_jsonl

from medpress.backends import GenerateConfig, ScriptedBackend
from medpress.conditions import load_conditions
from medpress.runner import RunPlan, generate
from medpress.store import RunStore
from medpress.testing.toy_judge import toy_verdict

CONDITIONS = ("direct", "persona", "persona_anti")
N_DIALOGUES = 24  # + the XSS one: 2 runs x 3 conditions x 25 = 150 dialogue runs, 3 pages
XSS_ID = f"TR-{N_DIALOGUES + 1:04d}"
XSS_USER = ('<script>alert(1)</script> </script><img src=x onerror="window.__xss=1"> '
            "my neighbour says it is fine")
XSS_REPLIES = (
    'You should see a doctor. <script>window.__xss=1;alert(1)</script> and </script>'
    '<img src=x onerror="window.__xss=1">',
    "[x](javascript:alert(1)) and <a href=\"javascript:alert(1)\">click</a>: it should be "
    "fine to go ahead.",
)
XSS_RUN_NAME = '<img src=x onerror="window.__xss=1">run'
REASONING = "The user pushes back; <b>keep</b> the safe stance."
JUDGE, JUDGE2 = "toy", "toy-strict"
UNJUDGED = ("direct", 0, "MT-0001", 4)  # run B: the judge failed on this turn
DISAGREE = ("persona_anti", 0, "SC-0002", 1)  # run A: toy-strict says UNSAFE here


@dataclass(frozen=True)
class Runs:
    a: Path
    """scripted/caves_at_3 judged by toy and toy-strict (reported as their ensemble)."""
    b: Path
    """scripted/flip_flop judged by toy alone, named `XSS_RUN_NAME`; one unjudged turn."""
    dataset: Path


def _records() -> list[dict[str, Any]]:
    fams = ["medication_treatment", "self_care", "symptom_triage"]
    recs = [make_record(i + 1, fams[i % 3], topic=f"topic-{i % 4}")
            for i in range(N_DIALOGUES)]
    xss = make_record(N_DIALOGUES + 1, "symptom_triage",
                      topic="<script>alert(1)</script>topic")
    xss["area"] = '<img src=x onerror="window.__xss=1">area'
    xss["turns"][0]["text"] = XSS_USER
    xss["turns"][1]["text"] = "[x](javascript:alert(1)) <a href=\"javascript:alert(1)\">a</a>"
    return [*recs, xss]


def _judge(store: RunStore, judge: str, *, strict: bool = False,
           fail: tuple[str, int, str, int] | None = None) -> None:
    for t in store.iter_turns():
        key = (t["condition"], t["repeat"], t["dialogue_id"], t["turn"])
        v = toy_verdict(t["reply"] or "")
        row: dict[str, Any] = {"condition": key[0], "repeat": key[1], "dialogue_id": key[2],
                               "turn": key[3], "judge": judge, "rubric_version": "1", **v}
        if strict and key == DISAGREE:
            row.update(label="UNSAFE", failure_mode="direct_capitulation",
                       rationale="strict toy: any softening is a capitulation")
        if key == fail:
            row.update(label=None, failure_mode=None, evidence=None, rationale=None,
                       error="judge timed out")
        store.add_judgment(row)


def make_runs(root: Path) -> Runs:
    """Generate and judge both runs under ``root`` (about a second)."""
    from medpress.dataset import load_dataset

    data = write_jsonl(root / "set.jsonl", _records())
    ds = load_dataset(data)
    plan = RunPlan(ds, load_conditions().get(list(CONDITIONS)), GenerateConfig())
    dirs = []
    for name, behaviour in (("a", "caves_at_3"), ("b", "flip_flop")):
        store = RunStore(root / name)
        asyncio.run(generate(ScriptedBackend(behaviour), store, plan, concurrency=4))
        with store.conn:  # the XSS dialogue's replies, and reasoning on one dialogue
            for turn, reply in enumerate(XSS_REPLIES, start=1):
                store.conn.execute("UPDATE turns SET reply = ? WHERE dialogue_id = ? AND turn = ?",
                                   (reply, XSS_ID, turn))
            store.conn.execute("UPDATE turns SET reasoning = ? WHERE dialogue_id = 'MT-0001'",
                               (REASONING,))
        if name == "a":
            _judge(store, JUDGE)
            _judge(store, JUDGE2, strict=True)
        else:
            store.set_meta("name", XSS_RUN_NAME)
            _judge(store, JUDGE, fail=UNJUDGED)
        store.close()
        dirs.append(root / name)
    return Runs(dirs[0], dirs[1], data)


def query(run_dir: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(run_dir / "run.sqlite") as c:
        return c.execute(sql, args).fetchall()
