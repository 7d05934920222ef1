"""Issue 16: the labelling loop (labels sample -> import -> metrics --gold) end to end."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_record, scripted_stance, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.judges.gold_sample import _allocate, designs
from medpress.store import RunStore
from medpress.testing import FakeServer

runner = CliRunner()
FAMS = ("medication_treatment", "self_care", "symptom_triage")


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def judged(tmp_path: Path, fake_server: Callable[..., FakeServer]) -> Path:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 13)])
    rd = tmp_path / "run"
    assert invoke("generate", "-m", "scripted/flip_flop", "--dataset", str(data), "--run-dir",
                  str(rd), "--conditions", "direct,persona").exit_code == 0
    url = fake_server(judge=True).base_url
    assert invoke("judge", str(rd), "--judge", "openai/toy", "--judge-base-url",
                  url).exit_code == 0
    return rd


def test_sample_sheet_import_and_corrected_metrics(judged: Path) -> None:
    res = invoke("labels", "sample", str(judged), "-n", "8", "--by", "condition", "--seed", "3")
    assert res.exit_code == 0, res.output
    design = designs(RunStore.open_existing(judged))[-1]
    assert design.id == "s1" and len(design.units) == 8
    assert sorted({c for c, _ in design.units}) == ["direct", "persona"]
    assert sum(c == "direct" for c, _ in design.units) == 4  # proportional to 12 and 12
    # the same draw again is the same design; another seed is a second one
    invoke("labels", "sample", str(judged), "-n", "8", "--by", "condition", "--seed", "3")
    assert [d.id for d in designs(RunStore.open_existing(judged))] == ["s1"]
    invoke("labels", "sample", str(judged), "-n", "8", "--by", "condition", "--seed", "4",
           "--out", str(judged / "other"))
    again = designs(RunStore.open_existing(judged))
    assert [d.id for d in again] == ["s1", "s2"] and again[1].units != design.units
    sheet = judged / "labelling" / "s1.csv"
    rows = list(csv.DictReader(sheet.open()))
    assert len(rows) == 8 * 5
    assert {(r["condition"], r["dialogue_id"]) for r in rows} == set(design.units)
    assert all(r["judge_label"] == "" and r["label"] == "" for r in rows)  # blind by default
    assert all(r["unsafe_belief"].startswith("belief") and r["reply"] for r in rows)
    # a labeller reads each reply's stance (here: the scripted wording) and fills `label`
    for r in rows:
        r["label"] = scripted_stance(r["reply"])
    done = sheet.with_name("done.csv")
    with done.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert invoke("labels", "import", str(judged), str(done), "--labeller",
                  "alice").exit_code == 0
    res = invoke("metrics", str(judged), "--judge", "openai/toy", "--gold", "alice", "--json")
    out = json.loads(res.stdout)
    assert "on sample s1 (8 dialogues, seed 3, stratified by condition)" in out["gold"]
    for g in out["groups"]:
        if g["family"] != "all":
            continue
        assert g["n_gold_dialogues"] == 4
        for key in ("corrected", "judge_only", "gold_only"):
            assert set(g[key]) >= {"UAR", "SAR", "AR", "FR", "ToF", "NoF", "UAR_at"}
        mine = [r for r in rows if r["condition"] == g["condition"]]
        unsafe = sum(r["label"] == "UNSAFE" for r in mine) / len(mine)
        assert g["gold_only"]["UAR"]["estimate"] == pytest.approx(unsafe)
        assert sum(sum(v.values()) for v in g["confusion"].values()) == len(mine)
        assert g["judge_only"]["UAR"]["estimate"] == pytest.approx(g["UAR"])
    res = invoke("metrics", str(judged), "--judge", "openai/toy", "--gold", "alice")
    assert "judge-corrected figures (gold: alice" in res.output
    rep = judged / "rep"
    invoke("report", str(judged), "--judge", "openai/toy", "--gold", "alice", "--out", str(rep))
    assert "## Corrected for the judge's errors\n\nCorrected with 'alice' on sample s1" in (
        rep / "report.md").read_text()
    saved = json.loads((rep / "metrics.json").read_text())
    assert saved["groups"][0]["corrected"] == out["groups"][0]["corrected"]


def test_sampling_errors_and_allocation(judged: Path) -> None:
    assert _allocate({"a": 10, "b": 30}, 8) == {"a": 2, "b": 6}
    # proportional gives a 0, b 5, c 1; every stratum gets two where it can, from the largest
    assert _allocate({"a": 1, "b": 30, "c": 9}, 6) == {"a": 1, "b": 3, "c": 2}
    assert sum(_allocate({"a": 5, "b": 5, "c": 5}, 7).values()) == 7
    for args, msg in ((["-n", "0"], "-n must be 1..24"), (["-n", "99"], "-n must be 1..24"),
                      (["-n", "4", "--by", "colour"], "unknown field 'colour'")):
        res = runner.invoke(app, ["labels", "sample", str(judged), *args])
        assert res.exit_code == 2 and msg in res.output, res.output
    res = runner.invoke(app, ["metrics", str(judged), "--judge", "openai/toy", "--gold",
                              "nobody"])
    assert res.exit_code == 2 and "nobody" in res.output
    res = runner.invoke(app, ["metrics", "--labels", "x.csv", "--gold", "alice"])
    assert res.exit_code == 2 and "--gold needs RUN_DIR" in res.output


def test_labels_of_another_generation_are_never_attached(judged: Path) -> None:
    invoke("labels", "sample", str(judged), "-n", "2", "--seed", "1")
    sheet = judged / "labelling" / "s1.csv"
    rows = list(csv.DictReader(sheet.open()))
    for r in rows:
        r["label"] = "SAFE"
    rows[0]["reply"] = rows[0]["reply"] + " (a different generation)"
    done = sheet.with_name("other.csv")
    with done.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = invoke("labels", "import", str(judged), str(done), "--labeller", "bob")
    assert f"{len(rows) - 1} label(s) added" in res.output
    assert "1 whose reply is not the run's (skipped" in res.output.replace("\n", " ")


def test_judge_errors_from_a_judge_check_file(judged: Path, tmp_path: Path) -> None:
    perfect = {lab: {p: 10 * (p == lab) for p in ("SAFE", "UNSAFE", "AMBIGUOUS")}
               for lab in ("SAFE", "UNSAFE", "AMBIGUOUS")}
    check = tmp_path / "check.json"
    check.write_text(json.dumps({"judge": "openai/toy", "sets": {
        "references": {"confusion": perfect}, "real": {"confusion": perfect}}}))
    res = invoke("metrics", str(judged), "--judge", "openai/toy", "--judge-errors",
                 str(check), "--json")
    out = json.loads(res.stdout)
    assert "confusion matrix of openai/toy on real" in out["notes"][-1]
    for g in out["groups"]:  # a judge that never errs: the correction changes nothing
        assert g["matrix_corrected"]["UAR"]["estimate"] == pytest.approx(g["UAR"])
    res = runner.invoke(app, ["metrics", str(judged), "--judge", "openai/toy",
                              "--judge-errors", f"{check}:hard"])
    assert res.exit_code == 2 and "no set 'hard'" in res.output
