"""The CLI end to end: clean errors, metrics from a file, report, labels import, judge-check."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import judged_reply, make_record, scripted_stance, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.cli.common import safe_name
from medpress.testing import FakeServer

runner = CliRunner()
FAMS = ["medication_treatment", "self_care", "symptom_triage"]


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def stance_judge(body: dict[str, Any]) -> str:
    reply = judged_reply(body)
    lab = scripted_stance(reply)
    mode = {"SAFE": None, "UNSAFE": "direct_capitulation", "AMBIGUOUS": "noncommittal_hedge"}[lab]
    return json.dumps({"label": lab, "failure_mode": mode, "evidence": reply[:25],
                       "rationale": "x", "helpfulness": "SUBSTANTIVE"})


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 10)])


def test_validate_prints_every_problem_without_traceback(tmp_path: Path) -> None:
    bad = make_record(1)
    bad["family"] = "dentistry"
    path = write_jsonl(tmp_path / "bad.jsonl", [bad])
    res = runner.invoke(app, ["data", "validate", str(path)])
    assert res.exit_code == 2
    assert "bad.jsonl:1 [MT-0001] family: unknown family 'dentistry'" in res.output
    assert "Traceback" not in res.output


def test_safe_run_dir_names() -> None:
    assert "/" not in safe_name("openai/../../x") and ".." not in safe_name("openai/../../x")
    assert safe_name("openai/Qwen/Qwen3-32B") == "openai_Qwen_Qwen3-32B"


def test_run_end_to_end_then_metrics_report_import(
    tmp_path: Path, dataset: Path, fake_server: Callable[..., FakeServer]
) -> None:
    server = fake_server(responder=stance_judge)
    rd = tmp_path / "run"
    res = invoke("run", "-m", "scripted/caves_at_2", "--judge", "openai/j", "--judge-base-url",
                 server.base_url, "--dataset", str(dataset), "--run-dir", str(rd))
    assert res.exit_code == 0, res.output
    assert "report:" in res.output
    for f in ("report.md", "metrics.json", "groups.csv", "uar_by_turn.png", "survival.png"):
        assert (rd / "report" / f).stat().st_size > 0
    out = json.loads(invoke("metrics", str(rd), "--json", "--n-boot", "200").output)
    g = next(x for x in out["groups"] if x["condition"] == "direct" and x["family"] == "all")
    assert g["UAR"] == pytest.approx(0.8) and g["ToF"] == pytest.approx(1.0)
    assert g["UAR_at"][0] == 0.0 and g["FR"] == 1.0
    assert out["labels"].startswith("openai/j [rubric ")
    # export carries one row per generated turn
    exp = tmp_path / "e.csv"
    invoke("export", str(rd), "--format", "csv", "--out", str(exp))
    with exp.open(newline="") as fh:
        exported = list(csv.DictReader(fh))
    assert len(exported) == 9 * 5 * 4
    first = exported[0]
    assert list(first)[-7:] == ["judge", "label", "failure_mode", "evidence", "rationale",
                                "judge_error", "tags"]
    assert first["judge"].startswith("openai/j [rubric ") and first["label"] == "SAFE"
    assert first["evidence"] and first["evidence"] in first["reply"]  # the judge's quote
    assert first["finish_reason"] == "stop" and first["judge_error"] == ""
    # human labels attach beside the judge's, never overwriting
    labels = tmp_path / "human.jsonl"
    labels.write_text("".join(json.dumps({
        "model": "scripted/caves_at_2", "condition": "direct", "dialogue_id": f"MT-000{i}",
        "family": "medication_treatment", "turn": 1, "label": "UNSAFE"}) + "\n"
        for i in (3, 6, 9)))
    res = invoke("labels", "import", str(rd), str(labels), "--labeller", "ann")
    assert "3 label(s) added" in res.output
    res = invoke("labels", "import", str(rd), str(labels), "--labeller", "ann")
    assert "0 label(s) added" in res.output and "3 already present" in res.output
    only_j = json.loads(invoke("metrics", str(rd), "--json", "--judge", "openai/j",
                               "--n-boot", "50").output)
    assert only_j["groups"][0]["UAR_at"][0] == 0.0


def test_metrics_from_label_file_and_bad_file(tmp_path: Path) -> None:
    rows = [{"model": "m", "condition": "direct", "dialogue_id": "d1", "family": "self_care",
             "turn": t, "label": lab} for t, lab in enumerate(["SAFE", "UNSAFE", ""], 1)]
    f = tmp_path / "l.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = json.loads(invoke("metrics", "--labels", str(f), "--json").output)
    g = out["groups"][0]
    assert g["UAR"] == 0.5 and g["unjudged"] == 1 and g["ToF"] == 1
    rows[1]["label"] = "MAYBE"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = runner.invoke(app, ["metrics", "--labels", str(f)])
    assert res.exit_code == 2 and "MAYBE" in res.output and "Traceback" not in res.output


def test_judge_check_on_references(
    tmp_path: Path, dataset: Path, fake_server: Callable[..., FakeServer]
) -> None:
    def judge(body: dict[str, Any]) -> str:
        reply = judged_reply(body)
        lab = {"safe reply": "SAFE", "unsafe reply": "UNSAFE", "hedge": "SAFE"}[reply]
        return json.dumps({"label": lab, "evidence": reply, "rationale": "x",
                           "helpfulness": "SUBSTANTIVE",
                           "failure_mode": None if lab == "SAFE" else "direct_capitulation"})

    server = fake_server(responder=judge)
    res = invoke("judge-check", "--judge", "openai/j", "--judge-base-url", server.base_url,
                 "--dataset", str(dataset), "--json")
    r = json.loads(res.output)["sets"]["references"]
    assert r["n"] == 27 and r["unjudged"] == 0
    assert r["accuracy"] == pytest.approx(2 / 3)
    assert r["confusion"]["AMBIGUOUS"] == {"SAFE": 9, "UNSAFE": 0, "AMBIGUOUS": 0}
    assert r["per_class"]["UNSAFE"]["recall"] == 1.0
    assert r["per_class"]["SAFE"]["precision"] == 0.5


def test_labels_agreement_of_the_shipped_second_annotator(tmp_path: Path) -> None:
    labels = Path(__file__).resolve().parents[2] / "labels"
    first, second = labels / "smollm2_heldout.jsonl", labels / "smollm2_heldout_second.jsonl"
    res = invoke("labels", "agreement", str(first), str(second), "--json")
    report = json.loads(res.stdout)
    # the figures labels/README.md states: 57 of 60 equal, kappa 0.90
    assert report["n"] == 60 and report["accuracy"] == 57 / 60
    assert round(report["kappa"], 2) == 0.90
    assert report["only_in_first"] == 260 and report["only_in_second"] == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(second.read_text().splitlines()[0].replace('"label": "', '"label": "X') + "\n")
    res = runner.invoke(app, ["labels", "agreement", str(first), str(bad)])
    assert res.exit_code != 0 and f"{bad}:1: label: unknown label" in res.output
