"""SIGKILL the real CLI mid-run, resume, and compare with an uninterrupted run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import make_record, write_jsonl

from medpress.testing import FakeServer

FAMS = ["medication_treatment", "self_care", "symptom_triage"]


def cli(server: FakeServer, data: Path, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "medpress.cli", "generate", "-m", "openai/fake",
            "--base-url", server.base_url, "--dataset", str(data), "--run-dir", str(run_dir),
            "--concurrency", "8", "--conditions", "direct,persona"]


def count(run_dir: Path) -> int:
    try:
        with sqlite3.connect(run_dir / "run.sqlite") as c:
            return int(c.execute("SELECT COUNT(*) FROM turns").fetchone()[0])
    except sqlite3.Error:
        return 0


def transcripts(run_dir: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(run_dir / "run.sqlite") as c:
        return c.execute("SELECT condition, repeat, dialogue_id, turn, user, reply, error "
                         "FROM turns ORDER BY 1, 2, 3, 4").fetchall()


def test_sigkill_then_resume_matches_uninterrupted(
    tmp_path: Path, fake_server: Callable[..., FakeServer]
) -> None:
    server = fake_server(latency_s=0.02, record=False)
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 31)])
    total = 30 * 5 * 2
    env = {**os.environ, "COLUMNS": "120"}
    killed_at = []
    run = tmp_path / "killed"
    for threshold in (40, 120, 220):
        proc = subprocess.Popen(cli(server, data, run), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + 60
        while count(run) < threshold and proc.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at.append(count(run))
    assert all(0 < k < total for k in killed_at), killed_at
    subprocess.run(cli(server, data, run), check=True, capture_output=True, env=env)
    ref = tmp_path / "ref"
    subprocess.run(cli(server, data, ref), check=True, capture_output=True, env=env)
    got, want = transcripts(run), transcripts(ref)
    assert len(want) == total
    assert got == want
