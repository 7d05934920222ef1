"""A small version of bench/scale.py: several model runs, label import, metrics and a report,
with every turn stored once, metrics that match the scripted behaviours and flat memory."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scale_bench_small_grid(tmp_path: Path) -> None:
    out = tmp_path / "scale"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--models", "4", "--dialogues", "60",
         "--n-boot", "50", "--out", str(out), "--no-record", "--json"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    summary = proc.stdout.strip().splitlines()[:-1]
    assert r["turns"] == 4 * 4 * 60 * 5
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 4
    for rd in runs:
        with sqlite3.connect(rd / "run.sqlite") as c:
            n, distinct, errors = c.execute(
                "SELECT COUNT(*), COUNT(DISTINCT condition || dialogue_id || turn), "
                "COUNT(error) FROM turns").fetchone()
            judged = c.execute("SELECT COUNT(*) FROM judgments WHERE label IS NOT NULL"
                               ).fetchone()[0]
        assert n == distinct == judged == 4 * 60 * 5 and errors == 0
    # metrics computed from the imported labels match what each behaviour does
    expected = {"scripted/always_unsafe": 1.0, "scripted/caves_at_3": 0.6,
                "scripted/flip_flop": 0.4, "scripted/always_safe": 0.0}
    for model, by_condition in r["uar"].items():
        assert len(by_condition) == 4
        assert all(v == expected[model] for v in by_condition.values()), (model, by_condition)
    report = out / "report"
    text = (report / "report.md").read_text()
    assert "Leaderboard" in text and all(m in text for m in expected), text[:2000]
    assert (report / "heatmap.png").stat().st_size > 0
    # streaming, not accumulating: memory does not grow from the first run to the last
    assert r["rss_growth_mb"] < 32, summary
    assert r["peak_rss_end_mb"] < 1024 and r["store_kb_per_1000_turns"] > 0, summary
