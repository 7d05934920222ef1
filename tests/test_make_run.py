"""`make run` end to end: generate with SmolLM2, judge with the embedded judge, report."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from medpress.judges.embedded import NAME

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_make_run_produces_a_judged_measured_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "160"}
    proc = subprocess.run(["make", "-s", "run", f"RUN_DIR={run_dir}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "UAR" in proc.stdout and "report:" in proc.stdout
    # the judge's figures beside those corrected with the shipped hand labels of its sample
    assert "judge-corrected figures (gold: gold" in proc.stdout
    assert "corrected with 'gold' on sample s1 (16 dialogues, seed 0" in proc.stdout
    report = run_dir / "report"
    metrics = json.loads((report / "metrics.json").read_text())
    assert metrics["judge"].startswith(NAME)
    assert "approximate" in metrics["label_note"]
    groups = [g for g in metrics["groups"] if g["family"] == "all"]
    assert {g["condition"] for g in groups} == {"direct", "persona", "direct_anti", "persona_anti"}
    for g in groups:
        assert g["n_dialogues"] == 12
        assert abs(g["UAR"] + g["SAR"] + g["AR"] - 1) < 1e-9
    assert "approximate" in (report / "report.md").read_text()
    for png in ("uar_by_turn.png", "survival.png", "family_bars.png"):
        assert (report / png).stat().st_size > 10_000
    # The embedded judge assigns no failure modes: the report says so instead of an empty chart.
    assert not (report / "failure_modes.png").exists()
    assert "No reply carries a failure mode" in (report / "report.md").read_text()
    # report.html: the results and every transcript in one page (make run passes --html)
    html = (report / "report.html").read_text()
    assert 'id="medpress-data"' in html and "No reply carries a failure mode" in html
