"""Issue 19: the ``twins`` and ``control`` suites, ``records.optional``/``pressures`` in
manifests, ``label_rate`` over a list of labels, and the ``always_agree`` baseline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.suites.conftest import (
    control_judge,
    control_record,
    copy_suite,
    twin_record,
    twins_judge,
)
from typer.testing import CliRunner

from medpress.backends.scripted import scripted_reply, stance_for
from medpress.metrics import LabelRow
from medpress.metrics.registry import compute_suite_groups
from medpress.suites import MetricSpec, SuiteError, load_suite_dataset, resolve_suite
from medpress.testing import FakeServer

runner = CliRunner()
FAMS = ("medication_treatment", "self_care", "symptom_triage")
SHIPPED_FILES = {"twins": [f"data/{f}.jsonl" for f in FAMS],
                 "control": ["data/questions.jsonl"]}


def invoke(*args: str) -> Any:
    from medpress.cli import app

    return runner.invoke(app, list(args), catch_exceptions=False)


def test_twins_and_control_are_listed() -> None:
    res = invoke("suites", "--json")
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert {"twins", "control"} <= set(rows)
    twins, control = resolve_suite("twins"), resolve_suite("control")
    assert twins.manifest.records.optional == ["mirrors"]
    assert control.manifest.records.pressures == ["initial"]
    assert twins.manifest.headline == ["FCR", "ORR", "OTR", "APR"]
    assert control.manifest.headline == ["substantive_rate", "refusal_rate", "deflect_rate"]


@pytest.mark.parametrize("name", ["twins", "control"])
def test_shipped_suite_is_lint_clean(name: str) -> None:
    """Strict (counts included) once every data file exists; until then, the files that exist
    are linted without the count rule."""
    suite = resolve_suite(name)
    present = [f for f in SHIPPED_FILES[name] if (suite.path / f).is_file()]
    if not present:
        pytest.skip(f"{name}: no records written yet")
    if len(present) == len(SHIPPED_FILES[name]):
        res = invoke("data", "lint", "--suite", name)
        assert res.exit_code == 0, res.output
        ds = load_suite_dataset(suite)
        expect = suite.manifest.expect
        assert len(ds) == expect.records
        assert {f: sum(d.family == f for d in ds) for f in FAMS} == dict.fromkeys(
            FAMS, expect.per_stratum)
        return
    from medpress.suites.lint import lint_suite

    partial = suite.__class__(suite.manifest.model_copy(update={
        "records": suite.manifest.records.model_copy(update={"files": present})}),
        suite.path, suite.shipped)
    issues = [i for i in lint_suite(partial, load_suite_dataset(partial)) if i.rule != "count"]
    assert not issues, "\n".join(map(str, issues))


def rows(labels: dict[str, list[str | None]], family: str = "self_care") -> list[LabelRow]:
    return [LabelRow("m", "direct", did, family, t, lab, n_turns=len(labs))
            for did, labs in labels.items() for t, lab in enumerate(labs, 1)]


def test_twins_metrics_by_hand() -> None:
    A, F, T = "APPROPRIATE", "FALSE_CORRECTION", "OVER_TRIAGE"
    table = rows({"a": [A, A, F, F, A],     # held, then corrected at turn 3
                  "b": [A, None, A, A, F],  # held, corrected at turn 5; one turn unjudged
                  "c": [T, F, A, A, A],     # began over-triaging: never held
                  "d": [A] * 5})            # held throughout
    specs = [MetricSpec.model_validate(m) for m in resolve_suite("twins").manifest.metrics]
    (g,) = [g for g in compute_suite_groups(table, specs, n_boot=100) if g.stratum == "all"]
    # 19 judged turns: F in a (2), b (1), c (1) = 4; O once; A 14
    assert g.values["FCR"] == pytest.approx(4 / 19)
    assert g.values["OTR"] == pytest.approx(1 / 19)
    assert g.values["APR"] == pytest.approx(14 / 19)
    assert g.values["FCR_at"] == [0.0, pytest.approx(1 / 3), 0.25, 0.25, 0.25]
    assert g.values["first_false_correction"] == pytest.approx(4.0)  # (3 + 5) / 2
    assert g.values["first_false_correction_share"] == pytest.approx(2 / 3)  # a, b of a, b, d
    assert g.kinds["first_false_correction"] == "turn" and g.unjudged == 1


def test_label_rate_over_a_list_of_labels_by_hand() -> None:
    R, D, S = "REFUSAL", "DEFLECT_ONLY", "SUBSTANTIVE"
    table = rows({"q1": [R], "q2": [D], "q3": [S], "q4": [S], "q5": [None]})
    specs = [MetricSpec.model_validate(m) for m in resolve_suite("control").manifest.metrics]
    (g,) = [g for g in compute_suite_groups(table, specs, n_boot=100) if g.stratum == "all"]
    assert (g.values["refusal_rate"], g.values["deflect_rate"], g.values["substantive_rate"],
            g.values["helpfulness_floor_miss"]) == (0.25, 0.25, 0.5, 0.5)
    assert g.n_dialogues == 5 and g.unjudged == 1
    with pytest.raises(ValueError, match="either label or labels"):
        compute_suite_groups(table, [MetricSpec.model_validate(
            {"use": "label_rate", "label": R, "labels": [D], "as": "x"})])


def test_always_agree_stance() -> None:
    assert [stance_for("always_agree", t) for t in (1, 5)] == ["agree", "agree"]
    reply = scripted_reply("always_agree", ["Is this right?"])
    assert "right" in reply and "emergency" not in reply


def _run(tmp_path: Path, root: Path, behaviour: str, judge: Callable[[dict[str, Any]], str],
         server: Callable[..., FakeServer]) -> dict[str, Any]:
    rd = tmp_path / "run"
    url = server(responder=judge).base_url
    res = invoke("run", "-m", f"scripted/{behaviour}", "--suite", str(root), "--conditions",
                 "direct", "--judge", "openai/j", "--judge-base-url", url, "--run-dir",
                 str(rd))
    assert res.exit_code == 0, res.output
    res = invoke("report", str(rd), "--n-boot", "50", "--html")
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads((rd / "report" / "metrics.json").read_text())
    out["report"] = (rd / "report" / "report.md").read_text()
    assert (rd / "report" / "report.html").is_file()
    return out


def _all(out: dict[str, Any]) -> dict[str, Any]:
    g: dict[str, Any] = next(x for x in out["groups"] if x["stratum"] == "all")
    return g


@pytest.mark.parametrize("behaviour, fcr, otr, apr, orr, flex", [
    ("always_agree", 0.0, 0.0, 1.0, 0.0, [1.0] * 5),
    ("caves_at_3", 0.0, 0.4, 0.6, 0.4, [0.0, 0.0, 1.0, 1.0, 1.0]),
    ("always_refuse", 1.0, 0.0, 0.0, 1.0, [0.0] * 5)])
def test_twins_scripted_end_to_end(
        tmp_path: Path, fake_server: Callable[..., FakeServer], behaviour: str,
        fcr: float, otr: float, apr: float, orr: float, flex: list[float]) -> None:
    """Three twins (one per family), five turns each, judged by the scripted wording: agreement
    is APPROPRIATE, the safe stance OVER_TRIAGE, a refusal FALSE_CORRECTION; the helpfulness
    tag calls agreement SUBSTANTIVE, a refusal REFUSAL and the safe stance DEFLECT_ONLY."""
    root = copy_suite("twins", tmp_path / "s", [twin_record(i, FAMS[i % 3], "MT-0001")
                                                for i in range(1, 4)])
    out = _run(tmp_path, root, behaviour, twins_judge, fake_server)
    g = _all(out)
    assert out["suite"]["name"] == "my-twins" and g["n_dialogues"] == 3
    assert (g["FCR"], g["OTR"], g["APR"]) == (pytest.approx(fcr), pytest.approx(otr),
                                              pytest.approx(apr))
    assert g["FCR_at"] == [fcr] * 5
    assert g["ORR"] == pytest.approx(orr) and g["flexibility_at"] == flex
    # nobody agrees and then corrects: always_agree holds, the others never begin APPROPRIATE
    assert g["first_false_correction"] is None
    assert g["first_false_correction_share"] == (0.0 if behaviour == "always_agree" else None)
    assert out["report"].startswith("# my-twins 1.1") and "FALSE_CORRECTION" in out["report"]


@pytest.mark.parametrize("behaviour, rates", [
    ("always_agree", (1.0, 0.0, 0.0, 0.0)), ("always_refuse", (0.0, 1.0, 0.0, 1.0)),
    ("hedger", (0.0, 0.0, 1.0, 1.0))])
def test_control_one_turn_suite_runs_by_path(
        tmp_path: Path, fake_server: Callable[..., FakeServer], behaviour: str,
        rates: tuple[float, float, float, float]) -> None:
    """A single-turn user suite (a copy of control) by path: run, judge, report."""
    root = copy_suite("control", tmp_path / "s", [control_record(i, FAMS[i % 3])
                                                  for i in range(1, 5)])
    out = _run(tmp_path, root, behaviour, control_judge, fake_server)
    g = _all(out)
    assert g["n_dialogues"] == 4 and g["n_turns_judged"] == 4 and g["unjudged"] == 0
    assert (g["substantive_rate"], g["refusal_rate"], g["deflect_rate"],
            g["helpfulness_floor_miss"]) == rates
    assert "| t1 |" in out["report"] and "| t2 |" not in out["report"]


def test_one_turn_suite_refuses_five_turn_records(tmp_path: Path) -> None:
    bad = control_record(2)
    bad["turns"] = twin_record(2)["turns"]
    root = copy_suite("control", tmp_path / "s", [control_record(1), bad])
    res = invoke("data", "lint", "--suite", str(root))
    assert res.exit_code == 2
    assert ("r.jsonl:2 [CQ-0002] turns: Value error, pressures must be initial in order, got "
            "initial, personal_experience") in " ".join(res.output.split())


def test_bad_mirrors_id_names_file_line_field(tmp_path: Path) -> None:
    root = copy_suite("twins", tmp_path / "s", [twin_record(1, mirrors="MT-0001"),
                                                twin_record(2, mirrors="MT-9999")])
    res = invoke("data", "lint", "--suite", str(root))
    assert res.exit_code == 1
    out = " ".join(res.output.split())
    assert f"{root / 'data' / 'r.jsonl'}:2 [BT-0002] mirrors: 'MT-9999' is not a dialogue of " \
        "the medpress suite" in out
    assert "MT-0001" not in out


def test_bad_optional_fields_name_file_line_field(tmp_path: Path) -> None:
    typo, wrong_type = twin_record(1), twin_record(2)
    typo["mirror"] = "MT-0001"
    wrong_type["mirrors"] = 7
    root = copy_suite("twins", tmp_path / "s", [typo, wrong_type, twin_record(3, mirrors=" ")])
    res = invoke("data", "lint", "--suite", str(root))
    assert res.exit_code == 2
    out = " ".join(res.output.split())
    for msg in ("r.jsonl:1 [BT-0001] mirror: unknown field",
                "r.jsonl:2 [BT-0002] mirrors: must be a string, got int",
                "r.jsonl:3 [BT-0003] mirrors: must not be empty"):
        assert msg in out


@pytest.mark.parametrize("records, key, message", [
    ({"files": ["data/*.jsonl"], "card": ["correct_belief"], "optional": ["id"]},
     "  optional:", "records.optional: ['id'] are base record fields"),
    ({"files": ["data/*.jsonl"], "card": ["correct_belief"], "optional": ["correct_belief"]},
     "  optional:", "records.optional: ['correct_belief'] are card fields"),
    ({"files": ["data/*.jsonl"], "card": ["correct_belief"], "pressures": []},
     "  pressures: []", "records.pressures: List should have at least 1 item"),
])
def test_bad_records_spec_names_manifest_line(tmp_path: Path, records: dict[str, Any],
                                              key: str, message: str) -> None:
    root = copy_suite("twins", tmp_path / "s", [twin_record(1)], records=records)
    text = (root / "suite.yaml").read_text().splitlines()
    # the line of the offending value: the list under the key, or the key's own line
    at = text.index(key) + 1
    line = at + 1 if key.endswith(":") else at
    with pytest.raises(SuiteError) as e:
        resolve_suite(str(root))
    assert f"suite.yaml:{line}" in str(e.value) and message in str(e.value)


def test_lint_names_metric_labels_missing_from_the_rubric(tmp_path: Path) -> None:
    suite = resolve_suite("twins")
    metrics = [*(m.model_dump(by_alias=True) for m in suite.manifest.metrics),
               {"use": "label_rate", "labels": ["SAFE"], "as": "x"}]
    root = copy_suite("twins", tmp_path / "s", [twin_record(1)], metrics=metrics)
    res = invoke("data", "lint", "--suite", str(root))
    assert res.exit_code == 1 and "x: labels ['SAFE'] are not in the rubric" in res.output
