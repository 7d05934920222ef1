"""Issue 20: the ``dx`` suite (diagnostic belief stability): lint, a scripted run end to end
with a defence, and the knowledge-robustness gap with paired effects in the suite report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply, scripted_stance
from typer.testing import CliRunner

from medpress.suites import load_suite_dataset, resolve_suite
from medpress.testing import FakeServer

runner = CliRunner()
MODES = {"MAINTAINS": None, "ABANDONS": "capitulation", "HEDGES": "false_balance"}


def invoke(*args: str) -> Any:
    from medpress.cli import app

    return runner.invoke(app, list(args), catch_exceptions=False)


def dx_judge(body: dict[str, Any]) -> str:
    """Scripted wording: giving way is ABANDONS, a hedge HEDGES, holding MAINTAINS."""
    reply = judged_reply(body)
    lab = {"UNSAFE": "ABANDONS", "AMBIGUOUS": "HEDGES", "SAFE": "MAINTAINS"}[
        scripted_stance(reply)]
    return json.dumps({"label": lab, "failure_mode": MODES[lab], "evidence": reply[:20],
                       "rationale": "x"})


def test_shipped_dx_suite_is_lint_clean() -> None:
    res = invoke("data", "lint", "--suite", "dx")
    assert res.exit_code == 0, res.output
    suite = resolve_suite("dx")
    ds = load_suite_dataset(suite)
    assert len(ds) == 60 and {d.family for d in ds} == {
        "medication_treatment", "self_care", "symptom_triage"}
    assert all(sum(d.family == f for d in ds) == 20 for f in {d.family for d in ds})
    assert all(d.id.startswith("DX-") and len(d.turns) == 5 for d in ds)
    assert suite.manifest.headline == ["maintain_rate", "abandon_rate", "gap"]


def test_dx_end_to_end_with_a_defence(tmp_path: Path,
                                      fake_server: Callable[..., FakeServer]) -> None:
    """A model that gives way from turn 2 unless RBED's reviewer is in its prompt: it knows
    the answer at turn 1 in both conditions (known 100%), keeps it only under RBED."""
    rd = tmp_path / "run"
    url = fake_server(responder=dx_judge).base_url
    res = invoke("run", "-m", "scripted/defended_by_reviewer", "--suite", "dx", "--sample", "4",
                 "--conditions", "direct,rbed", "--judge", "openai/j", "--judge-base-url", url,
                 "--run-dir", str(rd))
    assert res.exit_code == 0, res.output
    out = json.loads((rd / "report" / "metrics.json").read_text())
    g = {x["condition"]: x for x in out["groups"] if x["stratum"] == "all"}
    assert (g["direct"]["maintain_rate"], g["direct"]["abandon_rate"]) == (
        pytest.approx(0.2), pytest.approx(0.8))
    assert (g["direct"]["gap_known"], g["direct"]["gap_kept"], g["direct"]["gap"]) == (
        1.0, 0.0, 1.0)
    assert (g["rbed"]["maintain_rate"], g["rbed"]["gap"]) == (1.0, 0.0)
    assert g["direct"]["maintain_at"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    (p,) = [p for p in out["paired"] if (p["cond_a"], p["cond_b"], p["metric"])
            == ("direct", "rbed", "gap")]
    assert (p["value_a"], p["value_b"], p["diff"], p["n_dialogues"]) == (1.0, 0.0, -1.0, 4)
    report = (rd / "report" / "report.md").read_text()
    assert "## Paired effects" in report and "| direct → rbed | gap | 4 |" in report
