"""Issue 18: judge-check and judge ensembles with a suite's own labels."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply
from tests.suites.conftest import TAF_MODES, taf_judge, taf_record, write_suite
from typer.testing import CliRunner

from medpress.cli import app
from medpress.judges import SEVERITY, label_rows, resolve_view
from medpress.judges.views import disagreements, run_severity
from medpress.store import RunStore
from medpress.suites import load_suite_dataset, resolve_suite
from medpress.testing import FakeServer

runner = CliRunner()
TAF_LABELS = ["UNSAFE", "UNHELPFUL_REFUSAL", "SAFE"]


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_judge_check_scores_a_suite_on_its_references(
        fake_server: Callable[..., FakeServer]) -> None:
    ds = load_suite_dataset(resolve_suite("taf-med"))
    known = {getattr(d.references, kind): label for d in ds for kind, label in
             (("safe", "SAFE"), ("unsafe", "UNSAFE"), ("refusal", "UNHELPFUL_REFUSAL"))}
    prompts: list[str] = []

    def judge(body: dict[str, Any]) -> str:
        # right on SAFE and UNSAFE; every bare refusal taken for SAFE
        prompts.append(body["messages"][1]["content"])
        reply = judged_reply(body)
        lab = known[reply]
        lab = "SAFE" if lab == "UNHELPFUL_REFUSAL" else lab
        return json.dumps({"label": lab, "failure_mode": TAF_MODES[lab],
                           "evidence": reply[:20], "rationale": "x"})

    url = fake_server(responder=judge).base_url
    res = invoke("judge-check", "--suite", "taf-med", "--judge", "openai/j",
                 "--judge-base-url", url, "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["suite"] == "taf-med" and got["labels"] == TAF_LABELS
    ref = got["sets"]["references"]
    n = len(ds)
    assert list(got["sets"]) == ["references"] and ref["n"] == 3 * n and ref["unjudged"] == 0
    assert list(ref["per_class"]) == TAF_LABELS
    assert ref["confusion"]["UNHELPFUL_REFUSAL"] == {"UNSAFE": 0, "UNHELPFUL_REFUSAL": 0,
                                                     "SAFE": n}
    assert ref["per_class"]["UNSAFE"]["recall"] == 1.0
    assert ref["per_class"]["UNHELPFUL_REFUSAL"]["recall"] == 0.0
    # the suite's rubric, with the earlier turns answered by the safe reference
    d = ds.dialogues[0]
    mine = next(p for p in prompts if d.card["unsafe_act"] in p)
    assert "UNHELPFUL_REFUSAL" in mine and d.references.safe in mine
    res = invoke("judge-check", "--suite", "taf-med", "--judge", "openai/j",
                 "--judge-base-url", url)
    assert res.exit_code == 0, res.output
    assert "suite taf-med's references (safe → SAFE" in res.output
    assert "UNHELPFUL_REFUSAL" in res.output and "AMBIGUOUS" not in res.output


@pytest.mark.parametrize("args, message", [
    (["--set", "hard"], "--set hard: the hard set labels MedPRESS dialogues; suite 'taf-med'"),
    (["--set", "real"], "--set real: the real set labels MedPRESS dialogues; suite 'taf-med'"),
    (["--rubric-variants"], "--rubric-variants applies to the medpress suite; suite 'taf-med'"),
])
def test_judge_check_medpress_only_sets_refused_for_a_suite(
        args: list[str], message: str) -> None:
    res = invoke("judge-check", "--suite", "taf-med", "--judge", "openai/j",
                 "--judge-base-url", "http://127.0.0.1:9/v1", *args)
    assert res.exit_code == 2 and message in " ".join(res.output.split())


def test_judge_check_refuses_embedded_for_a_suite() -> None:
    res = invoke("judge-check", "--suite", "taf-med", "--judge", "embedded")
    assert res.exit_code == 2
    assert "embedded judge exists only for the medpress suite, not for suite 'taf-med'" in \
        " ".join(res.output.split())


def test_ensemble_ties_follow_the_suite_rubric(
        tmp_path: Path, fake_server: Callable[..., FakeServer]) -> None:
    """Two judges split SAFE vs UNHELPFUL_REFUSAL: the tie goes to the rubric's more severe
    label, which MedPRESS's SEVERITY does not even list."""
    root = write_suite(tmp_path / "s", [taf_record(1)])
    refusing = fake_server(responder=lambda body: json.dumps(
        {"label": "UNHELPFUL_REFUSAL", "failure_mode": "bare_refusal",
         "evidence": judged_reply(body)[:20], "rationale": "x"}))
    rd = tmp_path / "run"
    res = invoke("run", "-m", "scripted/always_safe", "--suite", str(root), "--conditions",
                 "direct", "--judge", "openai/a", "--judge-base-url",
                 fake_server(responder=taf_judge).base_url, "--judge", "openai/b",
                 "--judge-base-url", refusing.base_url, "--run-dir", str(rd),
                 "--judge-concurrency", "2")
    assert res.exit_code == 0, res.output
    store = RunStore.open_existing(rd)
    try:
        assert run_severity(store) == tuple(TAF_LABELS)
        view = resolve_view(store, "ensemble")
        assert view.severity == tuple(TAF_LABELS)
        rows, _ = label_rows(store, view)
        assert {r.label for r in rows} == {"UNHELPFUL_REFUSAL"}
        assert {d["ensemble"] for d in disagreements(store)} == {"UNHELPFUL_REFUSAL"}
    finally:
        store.close()


def test_medpress_runs_keep_the_medpress_severity(
        tmp_path: Path, fake_server: Callable[..., FakeServer]) -> None:
    rd = tmp_path / "run"
    res = invoke("generate", "-m", "scripted/always_safe", "--ids", "MT-0001", "--conditions",
                 "direct", "--run-dir", str(rd))
    assert res.exit_code == 0, res.output
    store = RunStore.open_existing(rd)
    try:
        assert run_severity(store) == SEVERITY == ("UNSAFE", "AMBIGUOUS", "SAFE")
    finally:
        store.close()
