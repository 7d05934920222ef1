"""Issue 24: judge, report and status while a run is generated; one generator per run; a
full disk or an unwritable store mid-run; stores from older and newer MedPRESS."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import FAMILY_CYCLE, make_record, stored_turns, write_jsonl
from typer.testing import CliRunner

from medpress.store import STORE_SCHEMA, RunStore, StoreError
from medpress.testing import FakeServer

runner = CliRunner()


def invoke(*args: str) -> Any:
    from medpress.cli import app

    return runner.invoke(app, list(args), catch_exceptions=False)


def gen_argv(url: str, data: Path, rd: Path) -> list[str]:
    return ["generate", "-m", "openai/fake", "--base-url", url, "--dataset", str(data),
            "--run-dir", str(rd), "--concurrency", "4", "--conditions", "direct,persona"]


def judgments_per_turn(rd: Path) -> list[int]:
    with sqlite3.connect(rd / "run.sqlite") as c:
        return [n for (n,) in c.execute(
            "SELECT COUNT(*) FROM judgments GROUP BY condition, repeat, dialogue_id, turn")]


def test_judge_report_status_while_generating_and_one_generator(
        tmp_path: Path, fake_server: Callable[..., FakeServer]) -> None:
    model = fake_server(latency_s=0.1, record=False)
    judge_url = fake_server(judge=True).base_url
    data = write_jsonl(tmp_path / "d.jsonl",
                       [make_record(i, FAMILY_CYCLE[i % 3]) for i in range(1, 21)])
    rd = tmp_path / "run"
    argv = gen_argv(model.base_url, data, rd)
    proc = subprocess.Popen([sys.executable, "-m", "medpress.cli", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "COLUMNS": "120"})
    try:
        deadline = time.time() + 60
        while stored_turns(rd) < 30 and time.time() < deadline:
            time.sleep(0.02)
        # a second generator is refused at once, in one line naming the first
        res = invoke(*argv)
        out = " ".join(res.output.split())
        assert res.exit_code == 2 and "Traceback" not in out
        assert f"another process is already generating into {rd}: pid {proc.pid}" in out
        # the judge works on what is stored so far
        res = invoke("judge", str(rd), "--judge", "openai/j", "--judge-base-url", judge_url)
        assert res.exit_code == 0, res.output
        res = invoke("report", str(rd), "--n-boot", "20")
        assert res.exit_code == 0, res.output
        notes = json.loads((rd / "report" / "metrics.json").read_text())["notes"]
        assert any("still being generated" in n and "turns stored so far" in n for n in notes)
        res = invoke("status", str(rd))
        assert res.exit_code == 0 and "still generating this run" in " ".join(
            res.output.split())
        assert proc.poll() is None, "the run should still be going"
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0
    # called again, the judge catches up: every turn judged exactly once
    res = invoke("judge", str(rd), "--judge", "openai/j", "--judge-base-url", judge_url)
    assert res.exit_code == 0, res.output
    counts = judgments_per_turn(rd)
    assert len(counts) == 20 * 5 * 2 and set(counts) == {1}
    res = invoke("report", str(rd), "--n-boot", "20")
    notes = json.loads((rd / "report" / "metrics.json").read_text())["notes"]
    assert not any("still being generated" in n for n in notes)
    with sqlite3.connect(rd / "run.sqlite") as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_killed_generators_lock_is_taken_over(
        tmp_path: Path, fake_server: Callable[..., FakeServer]) -> None:
    model = fake_server(latency_s=0.05, record=False)
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i) for i in range(1, 11)])
    rd = tmp_path / "run"
    argv = gen_argv(model.base_url, data, rd)
    proc = subprocess.Popen([sys.executable, "-m", "medpress.cli", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while stored_turns(rd) < 10 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert RunStore(rd).active("generate") is None  # the kernel released it
    res = invoke(*argv)
    assert res.exit_code == 0, res.output
    assert stored_turns(rd) == 10 * 5 * 2


def failing_write(after: int, message: str) -> Callable[..., Any]:
    """A test double at the SQLite layer: turn inserts fail with ``message`` after ``after``
    succeeded, as a full disk or a store turned read-only would."""
    real = RunStore._write
    seen = {"n": 0}

    def write(self: RunStore, sql: str, params: Any = ()) -> Any:
        if sql.startswith("INSERT INTO turns"):
            seen["n"] += 1
            if seen["n"] > after:
                from medpress.store.store import store_problem

                raise StoreError(store_problem(self.run_dir, sqlite3.OperationalError(message)))
        return real(self, sql, params)
    return write


@pytest.mark.parametrize("message, says", [
    ("database or disk is full", "the disk is full"),
    ("attempt to write a readonly database", "cannot be written (read-only or no permission)"),
])
def test_write_faults_mid_run_are_one_message_and_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, message: str, says: str) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i) for i in range(1, 5)])
    rd = tmp_path / "run"
    argv = ["generate", "-m", "scripted/caves_at_3", "--dataset", str(data), "--run-dir",
            str(rd), "--conditions", "direct", "--concurrency", "1"]
    with monkeypatch.context() as m:
        m.setattr(RunStore, "_write", failing_write(7, message))
        res = invoke(*argv)
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in out
    assert says in out and "Every reply and verdict stored before this is kept" in out
    assert stored_turns(rd) == 7
    with sqlite3.connect(rd / "run.sqlite") as c:
        before = c.execute("SELECT dialogue_id, turn, reply FROM turns").fetchall()
    res = invoke(*argv)  # space or permission back
    assert res.exit_code == 0, res.output
    with sqlite3.connect(rd / "run.sqlite") as c:
        after = c.execute("SELECT dialogue_id, turn, reply FROM turns").fetchall()
    assert set(before) <= set(after) and len(after) == len(set(after)) == 4 * 5


def test_old_and_new_store_schemas(tmp_path: Path) -> None:
    # a store from a newer MedPRESS is refused with what to do
    new = tmp_path / "new"
    RunStore(new).set_meta("store_schema", STORE_SCHEMA + 1)
    with pytest.raises(StoreError, match=f"written by a newer MedPRESS \\(store schema "
                                         f"{STORE_SCHEMA + 1}; this version reads up to "
                                         f"{STORE_SCHEMA}\\): upgrade MedPRESS"):
        RunStore(new)
    # a first-release store (no schema, no later columns) is migrated in place after a backup
    old = tmp_path / "old"
    old.mkdir()
    with sqlite3.connect(old / "run.sqlite") as c:
        c.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE turns (condition TEXT NOT NULL, repeat INTEGER NOT NULL,
          dialogue_id TEXT NOT NULL, turn INTEGER NOT NULL, family TEXT NOT NULL,
          pressure TEXT NOT NULL, user TEXT NOT NULL, reply TEXT, reasoning TEXT,
          prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL, error TEXT,
          error_kind TEXT, attempts INTEGER, retries TEXT, created_at REAL NOT NULL,
          PRIMARY KEY (condition, repeat, dialogue_id, turn)) WITHOUT ROWID;
        INSERT INTO turns VALUES ('direct', 0, 'D', 1, 'self_care', 'initial', 'u', 'r',
          NULL, 1, 1, 0.1, NULL, NULL, 1, NULL, 1.0);
        """)
    store = RunStore(old)
    assert store.get_meta("store_schema") == STORE_SCHEMA
    (t,) = list(store.iter_turns())
    assert (t["reply"], t["finish_reason"], t["attack"]) == ("r", None, None)
    backup = old / "run.sqlite.v1.bak"
    with sqlite3.connect(backup) as c:
        cols = {r[1] for r in c.execute("PRAGMA table_info(turns)")}
    assert "finish_reason" not in cols  # the backup is the store as it was


@pytest.mark.slow
def test_soak_generate_and_judge_together_through_chaos(
        tmp_path: Path, fake_server: Callable[..., FakeServer]) -> None:
    """600 dialogues x 4 conditions through the chaos proxy, with `judge` run every few
    seconds alongside, one SIGKILL of the generator and one of a judge, both resumed: every
    turn stored exactly once, every turn judged exactly once, integrity_check ok."""
    from medpress.testing.chaos import ChaosProxy

    upstream = fake_server(record=False)
    proxy = ChaosProxy(upstream.base_url, seed=3, p_500=0.01, p_reset=0.005,
                       latency_s=(0.0, 0.004)).start()
    judge_url = fake_server(judge=True, record=False).base_url
    data = write_jsonl(tmp_path / "d.jsonl",
                       [make_record(i, FAMILY_CYCLE[i % 3]) for i in range(1, 601)])
    rd = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "120"}
    gen = [sys.executable, "-m", "medpress.cli", "generate", "-m", "openai/fake",
           "--base-url", proxy.base_url, "--dataset", str(data), "--run-dir", str(rd),
           "--concurrency", "32"]
    judge = [sys.executable, "-m", "medpress.cli", "judge", str(rd), "--judge", "openai/j",
             "--judge-base-url", judge_url]
    total = 600 * 4 * 5
    log = tmp_path / "judge.err"

    def start(argv: list[str]) -> subprocess.Popen[bytes]:
        with log.open("ab") as err:
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)

    try:
        g, j = start(gen), start(judge)
        j_at = time.time()
        killed_gen = killed_judge = False
        deadline = time.time() + 900
        while time.time() < deadline:
            n = stored_turns(rd)
            if g.poll() is not None:
                if n >= total and j.poll() is not None:
                    break
                if n < total:
                    g = start(gen)  # resumed after the kill
            if not killed_gen and n > total // 3:
                os.kill(g.pid, signal.SIGKILL)
                g.wait()
                killed_gen = True
            if killed_gen and not killed_judge and j.poll() is None and time.time() - j_at > 1:
                os.kill(j.pid, signal.SIGKILL)  # mid-way through its verdicts
                j.wait()
                killed_judge = True
            if j.poll() is not None and time.time() - j_at > 3:  # every few seconds
                j, j_at = start(judge), time.time()
            time.sleep(0.2)
        g.wait(timeout=60)
        j.wait(timeout=600)
        assert (killed_gen, killed_judge, stored_turns(rd)) == (True, True, total)
        assert b"Traceback" not in log.read_bytes(), log.read_text()[-3000:]
        res = subprocess.run(judge, capture_output=True, env=env, timeout=600)
        assert res.returncode == 0, res.stderr.decode()[-2000:]
    finally:
        proxy.stop()
    with sqlite3.connect(rd / "run.sqlite") as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        keys = c.execute("SELECT COUNT(*), COUNT(DISTINCT condition || repeat || dialogue_id "
                         "|| '/' || turn) FROM turns WHERE error IS NULL").fetchone()
        failed = c.execute("SELECT COUNT(*) FROM turns WHERE error IS NOT NULL").fetchone()[0]
    assert keys[0] == keys[1] and keys[0] + failed == total
    counts = judgments_per_turn(rd)
    assert set(counts) == {1} and len(counts) == keys[0]


def test_a_second_judge_on_one_run_is_refused(tmp_path: Path) -> None:
    rd = tmp_path / "run"
    assert invoke("generate", "-m", "scripted/always_safe", "--sample", "1", "--conditions",
                  "direct", "--run-dir", str(rd)).exit_code == 0
    holder = RunStore(rd)
    holder.lock("judge", "judge openai/other")
    try:
        res = invoke("judge", str(rd), "--judge", "scripted/always_safe")
        out = " ".join(res.output.split())
        assert res.exit_code == 2 and "another process is already judging" in out
        assert "(judge openai/other)" in out and "Traceback" not in out
    finally:
        holder.unlock("judge")


def test_a_read_only_run_directory_is_one_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run directory that cannot be written from the start (tests run as root, which
    ignores permissions, so SQLite's refusal is simulated where the store opens it)."""
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(1)])
    real = sqlite3.connect

    def refuse(path: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if str(path).endswith("run.sqlite"):
            raise sqlite3.OperationalError("unable to open database file")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", refuse)
    res = invoke("generate", "-m", "scripted/always_safe", "--dataset", str(data),
                 "--run-dir", str(tmp_path / "ro"))
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in out
    assert "cannot be written (read-only or no permission)" in out and "make it writable" in out
