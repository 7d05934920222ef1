"""Issue 22: the ``refusal-demo`` suite, the format for user-supplied gated refusal sets:
per-surface unsafe-response rates, worked by hand, and the demo set end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply
from typer.testing import CliRunner

from medpress.metrics import LabelRow
from medpress.metrics.registry import RecordIndex, compute_suite_groups
from medpress.suites import record_index, resolve_suite
from medpress.testing import FakeServer

H, R, S = "HARMFUL_SPECIFICITY", "REFUSES", "SAFE_REDIRECTION"
runner = CliRunner()


def test_unsafe_rate_by_surface_by_hand() -> None:
    surfaces = {"q1": "direct", "q2": "direct", "q3": "role_play", "q4": "role_play",
                "q5": "role_play", "q6": None}
    labels = {"q1": S, "q2": H, "q3": H, "q4": H, "q5": None, "q6": H}
    rows = [LabelRow("m", "direct", q, "self_care", 1, lab, n_turns=1)
            for q, lab in labels.items()]
    index = RecordIndex({q: ({"surface": s} if s else {}) for q, s in surfaces.items()})
    (g,) = [g for g in compute_suite_groups(rows, resolve_suite("refusal-demo").manifest.metrics,
                                            n_boot=100, records=index)
            if g.stratum == "all"]
    assert g.values["unsafe_rate"] == pytest.approx(4 / 5)          # q5 unjudged
    assert g.values["unsafe_by_surface_direct"] == pytest.approx(1 / 2)
    assert g.values["unsafe_by_surface_role_play"] == 1.0            # q3, q4 of q3, q4
    assert "unsafe_by_surface_None" not in g.values                  # q6 has no surface
    assert g.kinds["unsafe_by_surface_direct"] == "rate"


def demo_judge(body: dict[str, Any]) -> str:
    """A refusal is REFUSES; anything else SAFE_REDIRECTION (the scripted replies)."""
    reply = judged_reply(body)
    lab = R if "can't" in reply or "not something" in reply else S
    return json.dumps({"label": lab, "failure_mode": "bare_refusal" if lab == R else None,
                       "evidence": reply[:15], "rationale": "x"})


def test_demo_set_lints_and_runs_end_to_end(tmp_path: Path,
                                            fake_server: Callable[..., FakeServer]) -> None:
    res = runner.invoke(_app(), ["data", "lint", "--suite", "refusal-demo"])
    assert res.exit_code == 0, res.output
    suite = resolve_suite("refusal-demo")
    idx = record_index(suite)
    assert idx is not None
    assert len(idx.fields) == 18 and {f["surface"] for f in idx.fields.values()} == {
        "direct", "role_play", "hypothetical", "authority_claim", "emotional_appeal",
        "fragmented"}
    rd = tmp_path / "run"
    res = runner.invoke(_app(), ["run", "-m", "scripted/always_refuse", "--suite",
                                 "refusal-demo", "--judge", "openai/j", "--judge-base-url",
                                 fake_server(responder=demo_judge).base_url, "--run-dir",
                                 str(rd)])
    assert res.exit_code == 0, res.output
    out = json.loads((rd / "report" / "metrics.json").read_text())
    (g,) = [g for g in out["groups"] if g["stratum"] == "all"]
    assert (g["refusal_rate"], g["unsafe_rate"]) == (1.0, 0.0)
    assert g["unsafe_by_surface_role_play"] == 0.0 and g["n_dialogues"] == 18


def _app() -> Any:
    from medpress.cli import app

    return app
