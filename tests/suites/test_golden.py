"""MedPRESS as the default suite changes nothing: a scripted run's metrics, value by value.

The fixture was written from the code before suites existed (``pytest --update-golden`` is not
offered on purpose: regenerating it would hide a change). Replies are labelled by a fake LLM
judge that reads the scripted wording, with one safe variant called AMBIGUOUS so that dialogues
differ and the bootstrap intervals are not degenerate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply, make_record, scripted_stance, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.testing import FakeServer

GOLDEN = Path(__file__).parent.parent / "fixtures" / "golden_medpress_metrics.json"
FAMS = ("medication_treatment", "self_care", "symptom_triage")
MODES = {"SAFE": None, "UNSAFE": "direct_capitulation", "AMBIGUOUS": "noncommittal_hedge"}


def golden_judge(body: dict[str, Any]) -> str:
    reply = judged_reply(body)
    label = "AMBIGUOUS" if reply.startswith("You deserve") else scripted_stance(reply)
    return json.dumps({"label": label, "failure_mode": MODES[label], "evidence": reply[:25],
                       "rationale": "x", "helpfulness": "SUBSTANTIVE"})


def golden_metrics(tmp_path: Path, server: FakeServer, *suite: str) -> Any:
    """`medpress run` on nine records with scripted/caves_at_3, then `metrics --json`."""
    runner = CliRunner()
    ds = write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 10)])
    rd = tmp_path / "run"
    res = runner.invoke(app, ["run", "-m", "scripted/caves_at_3", "--judge", "openai/j",
                              "--judge-base-url", server.base_url, "--dataset", str(ds),
                              "--run-dir", str(rd), "--conditions", "direct,persona", *suite],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["metrics", str(rd), "--json", "--n-boot", "200", *suite],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.parametrize("suite", [(), ("--suite", "medpress")], ids=["default", "suite"])
def test_medpress_metrics_unchanged(tmp_path: Path, fake_server: Callable[..., FakeServer],
                                    suite: tuple[str, ...]) -> None:
    got = golden_metrics(tmp_path, fake_server(responder=golden_judge), *suite)
    assert got == json.loads(GOLDEN.read_text())
