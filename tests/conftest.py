"""Shared fixtures: small dialogue sets and a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from medpress.dataset import PRESSURES, Dataset, load_dataset
from medpress.testing import FakeServer

EXAMPLE = Path(__file__).parent / "fixtures" / "MT-example.json"


def make_record(i: int, family: str = "medication_treatment", n_turns: int = 5,
                topic: str | None = None) -> dict[str, Any]:
    """A valid record whose turns are distinct, numbered texts."""
    prefix = {"medication_treatment": "MT", "self_care": "SC", "symptom_triage": "TR"}[family]
    return {
        "id": f"{prefix}-{i:04d}", "family": family, "topic": topic or f"topic-{i}",
        "area": "test-area", "unsafe_belief": f"belief {i}", "safe_stance": f"stance {i}",
        "rationale": f"rationale {i}", "source": "NHS", "urgency": "urgent",
        "turns": [{"pressure": PRESSURES[t % 5], "text": f"dialogue {i} user turn {t + 1} text"}
                  for t in range(n_turns)],
        "references": {"safe": "safe reply", "unsafe": "unsafe reply", "ambiguous": "hedge"},
    }


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def small_set(tmp_path: Path) -> Dataset:
    fams = ["medication_treatment", "self_care", "symptom_triage"]
    recs = [make_record(i + 1, fams[i % 3]) for i in range(6)]
    return load_dataset(write_jsonl(tmp_path / "set.jsonl", recs))


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeServer]]:
    servers: list[FakeServer] = []

    def start(**kw: Any) -> FakeServer:
        s = FakeServer(**kw).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def judged_reply(body: dict[str, Any]) -> str:
    """The reply a judge request asks about (between the rubric's <<< >>> markers)."""
    prompt: str = body["messages"][1]["content"]
    return prompt.split("<<<\n", 1)[1].split("\n>>>", 1)[0]


def scripted_stance(reply: str) -> str:
    """Which scripted reply list a reply came from, read from its wording."""
    if any(w in reply for w in ("should be fine", "probably okay", "wait and see")):
        return "UNSAFE"
    if any(w in reply for w in ("depends", "both sides", "opinions vary")):
        return "AMBIGUOUS"
    return "SAFE"


FAMILY_CYCLE = ("medication_treatment", "self_care", "symptom_triage")


def generate_argv(base_url: str, data: Path, run_dir: Path, *, concurrency: int,
                  conditions: str = "direct,persona") -> list[str]:
    """The real CLI, as a subprocess that tests can SIGKILL."""
    return [sys.executable, "-m", "medpress.cli", "generate", "-m", "openai/fake",
            "--base-url", base_url, "--dataset", str(data), "--run-dir", str(run_dir),
            "--concurrency", str(concurrency), "--conditions", conditions]


def stored_turns(run_dir: Path) -> int:
    """Turns committed so far, read by another process (0 before the store exists)."""
    try:
        with sqlite3.connect(run_dir / "run.sqlite", timeout=1) as c:
            return int(c.execute("SELECT COUNT(*) FROM turns").fetchone()[0])
    except sqlite3.Error:
        return 0


def stored_rows(run_dir: Path) -> list[tuple[object, ...]]:
    """Every stored turn's content (no timings), in key order, for comparing runs."""
    with sqlite3.connect(run_dir / "run.sqlite") as c:
        return c.execute("SELECT condition, repeat, dialogue_id, turn, family, pressure, user, "
                         "reply, error, error_kind FROM turns ORDER BY 1, 2, 3, 4").fetchall()
