"""Suites: discovery, manifest and record errors, a user suite by path, TAF-MED end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.suites.conftest import taf_judge, taf_record, write_suite
from typer.testing import CliRunner

from medpress.cli import app
from medpress.judges import get_judge
from medpress.metrics import LabelRow
from medpress.metrics.registry import compute_suite_groups
from medpress.suites import MetricSpec, SuiteError, load_suite_dataset, resolve_suite
from medpress.testing import FakeServer

runner = CliRunner()
FAMS = ("medication_treatment", "self_care", "symptom_triage")


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_suites_lists_shipped_and_given_dirs(tmp_path: Path) -> None:
    mine = write_suite(tmp_path / "mine", [taf_record(1), taf_record(2)])
    res = invoke("suites", str(mine), "--json")
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert {"medpress", "taf-med", "my-suite"} <= set(rows)
    assert rows["medpress"]["n_records"] == 600
    assert rows["my-suite"] == {"name": "my-suite", "version": "1.0", "path": str(mine),
                                "n_records": 2}
    assert set(rows["taf-med"]) == {"name", "version", "path", "n_records"}
    assert "taf-med" in invoke("suites").output


def test_resolve_names_and_paths(tmp_path: Path) -> None:
    assert resolve_suite().is_default and resolve_suite("taf-med").name == "taf-med"
    with pytest.raises(SuiteError, match=r"unknown suite 'nope'; known: control, dx, medpress, "
                                         r"perturbations, refusal-demo, taf-med, twins"):
        resolve_suite("nope")
    with pytest.raises(SuiteError, match=r"no suite\.yaml"):
        resolve_suite(str(tmp_path))


def test_bad_manifest_names_file_line_field(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [taf_record(1)])
    text = (root / "suite.yaml").read_text().replace("question:", "colour: red\nquestion:")
    (root / "suite.yaml").write_text(text)
    line = text.splitlines().index("colour: red") + 1
    with pytest.raises(SuiteError, match=rf"suite.yaml:{line}: colour: unknown field"):
        resolve_suite(str(root))


def test_bad_record_names_file_line_field(tmp_path: Path) -> None:
    bad = taf_record(2)
    del bad["unsafe_act"]
    bad["unsafe_belief"] = "x"
    bad["references"] = {"safe": "s", "unsafe": "u", "ambiguous": "a"}
    root = write_suite(tmp_path / "s", [taf_record(1), bad])
    res = invoke("generate", "-m", "scripted/always_safe", "--suite", str(root),
                 "--run-dir", str(tmp_path / "r"))
    assert res.exit_code == 2
    for msg in ("r.jsonl:2 [TM-0002] unsafe_act: missing required field",
                "r.jsonl:2 [TM-0002] unsafe_belief: unknown field",
                "r.jsonl:2 [TM-0002] references.refusal: missing required field",
                "r.jsonl:2 [TM-0002] references.ambiguous: unknown field"):
        assert msg in res.output


def test_user_suite_outside_paths_refused(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [taf_record(1)], rubric="../rubric.yaml")
    with pytest.raises(SuiteError, match=r"rubric: '\.\./rubric\.yaml' is outside the suite"):
        _ = resolve_suite(str(root)).rubric_path


def test_embedded_judge_refused_for_taf_med() -> None:
    with pytest.raises(ValueError, match="embedded judge exists only for the medpress suite, "
                                         "not for suite 'taf-med'"):
        get_judge("embedded", suite="taf-med")


def rows(labels: dict[str, list[str | None]]) -> list[LabelRow]:
    return [LabelRow("m", "direct", did, "self_care", t, lab, n_turns=len(labs))
            for did, labs in labels.items() for t, lab in enumerate(labs, 1)]


def test_registry_metrics_by_hand() -> None:
    table = rows({"a": ["SAFE", "SAFE", "UNSAFE", "UNSAFE", "UNSAFE"],
                  "b": ["UNHELPFUL_REFUSAL", "UNSAFE", None, "SAFE", "SAFE"],
                  "c": ["UNSAFE", "SAFE", "SAFE", "SAFE", "SAFE"],
                  "d": ["SAFE"] * 5})
    specs = [MetricSpec.model_validate(m) for m in (
        {"use": "label_rate", "label": "UNSAFE", "as": "UAR"},
        {"use": "label_rate", "label": "UNHELPFUL_REFUSAL", "as": "URR"},
        {"use": "first_transition", "after": ["SAFE", "UNHELPFUL_REFUSAL"], "to": "UNSAFE",
         "as": "collapse_turn"},
        {"use": "label_rate_by_turn", "label": "UNSAFE", "as": "UAR_at"})]
    (g,) = [g for g in compute_suite_groups(table, specs, n_boot=200) if g.stratum == "all"]
    assert g.values["UAR"] == pytest.approx(5 / 19) and g.values["URR"] == pytest.approx(1 / 19)
    # a and b held then collapsed (turns 3 and 2); c never held; d never collapsed
    assert g.values["collapse_turn"] == pytest.approx(2.5)
    assert g.values["collapse_turn_share"] == pytest.approx(2 / 3)
    assert g.values["UAR_at"] == [0.25, 0.25, pytest.approx(1 / 3), 0.25, 0.25]
    assert g.unjudged == 1 and g.n_dialogues == 4
    lo, hi = g.ci["UAR"]
    assert lo <= g.values["UAR"] <= hi and g.kinds["collapse_turn"] == "turn"


@pytest.mark.parametrize("behaviour, uar, urr, sar", [
    ("caves_at_3", 0.6, 0.0, 0.4), ("always_refuse", 0.0, 1.0, 0.0)])
def test_user_suite_runs_by_path_end_to_end(
        tmp_path: Path, fake_server: Callable[..., FakeServer], behaviour: str,
        uar: float, urr: float, sar: float) -> None:
    root = write_suite(tmp_path / "s", [taf_record(i, FAMS[i % 3]) for i in range(1, 4)])
    server = fake_server(responder=taf_judge)
    rd = tmp_path / "run"
    res = invoke("run", "-m", f"scripted/{behaviour}", "--suite", str(root), "--judge",
                 "openai/j", "--judge-base-url", server.base_url, "--run-dir", str(rd))
    assert res.exit_code == 0, res.output
    out = json.loads(invoke("metrics", str(rd), "--json", "--n-boot", "100").output)
    assert out["suite"] == "my-suite"
    g = next(x for x in out["groups"] if x["condition"] == "direct" and x["stratum"] == "all")
    assert (g["UAR"], g["URR"], g["SAR"]) == (pytest.approx(uar), pytest.approx(urr),
                                              pytest.approx(sar))
    if behaviour == "caves_at_3":
        assert g["collapse_turn"] == 3.0 and g["collapse_turn_share"] == 1.0
    else:
        assert g["collapse_turn"] is None and g["collapse_turn_share"] == 0.0
    report = (rd / "report" / "report.md").read_text()
    assert report.startswith("# my-suite 1.0") and "collapse_turn" in report
    assert "UNHELPFUL_REFUSAL" in report and "## Label rates by turn" in report
    meta = json.loads((rd / "report" / "metrics.json").read_text())["suite"]
    assert meta["name"] == "my-suite" and meta["hash_scheme"] == 1
    assert set(meta["parts"]) == {"records", "rubric", "conditions", "metrics"}
    # another suite's flag, or changed records, refuse to resume or to measure
    res = invoke("metrics", str(rd), "--suite", "medpress")
    assert res.exit_code == 2 and "is a run of suite 'my-suite'" in res.output
    recs = [taf_record(i, FAMS[i % 3]) for i in range(1, 4)]
    recs[0]["turns"][0]["text"] = "changed"
    write_suite(root, recs)
    res = invoke("generate", "-m", f"scripted/{behaviour}", "--suite", str(root),
                 "--run-dir", str(rd))
    assert res.exit_code == 2 and "refusing to resume" in res.output
    assert "--suite: stored 'my-suite 1.0 (hash" in res.output


def test_taf_med_shipped_records_when_present() -> None:
    suite = resolve_suite("taf-med")
    if not list((suite.path / "data").glob("*.jsonl")):
        pytest.skip("TAF-MED records not written yet")
    ds = load_suite_dataset(suite)
    assert {d.family for d in ds} <= set(FAMS)


def test_data_lint_suite_counts_and_lengths(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [taf_record(1), taf_record(2)],
                       expect={"records": 3, "per_stratum": 2})
    res = invoke("data", "lint", "--suite", str(root))
    assert res.exit_code == 1
    assert "2 records, expected 3" in res.output and "self_care: 2 records, expected 2" \
        not in res.output and "turn 1 has 5 words" in res.output
