"""Issue 14: fail fast with one clear line, exit codes that tell success from failure, and
options checked before a run directory is made."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_cli import stance_judge
from tests.conftest import generate_argv, make_record, stored_turns, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.testing import FakeServer

runner = CliRunner()
FAMS = ["medication_treatment", "self_care", "symptom_triage"]


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def error_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("error:")]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 4)])


@pytest.fixture
def closed_url() -> str:
    """A 127.0.0.1 URL on which nothing listens: the connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def scripted_run(tmp_path: Path, dataset: Path) -> Path:
    rd = tmp_path / "run"
    res = invoke("generate", "-m", "scripted/caves_at_2", "--dataset", str(dataset),
                 "--conditions", "direct", "--run-dir", str(rd))
    assert res.exit_code == 0, res.output
    return rd


# -- preflight ----------------------------------------------------------------------------------

def test_refused_connection_fails_at_once_naming_the_url(tmp_path: Path, dataset: Path,
                                                         closed_url: str) -> None:
    rd = tmp_path / "run"
    start = time.perf_counter()
    res = invoke("generate", "-m", "openai/m", "--base-url", closed_url, "--dataset",
                 str(dataset), "--run-dir", str(rd))
    assert time.perf_counter() - start < 5  # not 72 retries
    assert res.exit_code == 2 and "Traceback" not in res.output
    (line,) = error_lines(res.output)
    assert f"cannot connect to {closed_url} (openai/m): connection refused" in line
    assert "start the server or fix --base-url" in line
    assert not rd.exists()


def test_hosted_api_without_a_key_names_the_variable(tmp_path: Path, dataset: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rd = tmp_path / "run"
    res = invoke("generate", "-m", "openai/gpt-4.1-mini", "--dataset", str(dataset),
                 "--run-dir", str(rd))
    assert res.exit_code == 2
    (line,) = error_lines(res.output)
    assert "OPENAI_API_KEY is not set: openai/gpt-4.1-mini on https://api.openai.com/v1" in line
    assert not rd.exists()


def test_a_local_server_needs_no_key(tmp_path: Path, dataset: Path,
                                     fake_server: Callable[..., FakeServer],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_server()
    res = invoke("generate", "-m", "openai/m", "--base-url", server.base_url, "--dataset",
                 str(dataset), "--conditions", "direct", "--run-dir", str(tmp_path / "run"))
    assert res.exit_code == 0, res.output
    assert len(server.requests) == 15  # the preflight sends no request


def test_unreachable_judge_is_found_before_anything_runs(tmp_path: Path, dataset: Path,
                                                         scripted_run: Path,
                                                         closed_url: str) -> None:
    res = invoke("judge", str(scripted_run), "--judge", "openai/j", "--judge-base-url",
                 closed_url)
    assert res.exit_code == 2
    (line,) = error_lines(res.output)
    assert closed_url in line and "--judge-base-url" in line
    rd = tmp_path / "run2"
    res = invoke("run", "-m", "scripted/always_safe", "--judge", "openai/j", "--judge-base-url",
                 closed_url, "--dataset", str(dataset), "--run-dir", str(rd))
    assert res.exit_code == 2 and closed_url in res.output
    assert not rd.exists()  # nothing generated for a judge that cannot be reached
    res = invoke("judge-check", "--judge", "openai/j", "--judge-base-url", closed_url,
                 "--dataset", str(dataset))
    assert res.exit_code == 2 and closed_url in res.output


# -- exit codes ---------------------------------------------------------------------------------

def test_failed_turns_exit_1_with_the_next_step(tmp_path: Path,
                                                fake_server: Callable[..., FakeServer]) -> None:
    recs = [make_record(i, FAMS[i % 3]) for i in range(1, 4)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    server = fake_server(permanent_marker=recs[1]["turns"][2]["text"])  # dialogue 2, turn 3
    rd = tmp_path / "run"
    args = ["generate", "-m", "openai/m", "--base-url", server.base_url, "--dataset", str(data),
            "--conditions", "direct", "--run-dir", str(rd)]
    res = invoke(*args)
    assert res.exit_code == 1
    (line,) = error_lines(res.output)
    assert "1 turn(s) failed permanently (http_400: 1)" in line and "--retry-failed" in line
    assert "--allow-failed" in line
    # failed turns are counted apart: 2 dialogues x 5 turns + 2 turns before the failure
    assert re.search(r"turns generated\W+12\b", res.output)
    assert re.search(r"turns failed permanently\W+1 \(http_400: 1\)", res.output)
    # a resume that leaves the failure alone says so, and has nothing new to fail
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    assert "1 turn(s) of" in res.output and "--retry-failed redoes them" in res.output
    # --allow-failed accepts failures
    res = invoke(*args[:-1], str(tmp_path / "run2"), "--allow-failed")
    assert res.exit_code == 0, res.output
    # and the failure is redone once the cause is gone
    server.permanent_marker = None
    res = invoke(*args, "--retry-failed")
    assert res.exit_code == 0, res.output
    assert "failed permanently in an earlier session" not in res.output


def test_run_stops_before_judging_when_turns_failed(tmp_path: Path,
                                                   fake_server: Callable[..., FakeServer]
                                                   ) -> None:
    recs = [make_record(i, FAMS[i % 3]) for i in range(1, 4)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    server = fake_server(permanent_marker=recs[0]["turns"][2]["text"])
    res = invoke("run", "-m", "openai/m", "--base-url", server.base_url, "--judge",
                 "scripted/always_safe", "--dataset", str(data), "--conditions", "direct",
                 "--run-dir", str(tmp_path / "run"))
    assert res.exit_code == 1
    (line,) = error_lines(res.output)
    assert "failed permanently" in line and "nothing was judged" in line
    assert "2/3 judge" not in res.output


def test_judge_that_judges_nothing_exits_1_and_report_says_why(
    scripted_run: Path, fake_server: Callable[..., FakeServer]
) -> None:
    # no JSON at all: every verdict fails after its repair attempts
    bad = fake_server(responder=lambda body: "I think this reply is fine.")
    res = invoke("judge", str(scripted_run), "--judge", "openai/j", "--judge-base-url",
                 bad.base_url)
    assert res.exit_code == 1
    assert "0 judged, 15 unjudged" in res.output
    assert "15 of 15 verdicts failed" in res.output  # the reasons, grouped
    (line,) = error_lines(res.output)
    assert "openai/j judged nothing: every verdict failed" in line
    for cmd in (["report", str(scripted_run)], ["metrics", str(scripted_run)]):
        res = invoke(*cmd)
        assert res.exit_code == 2
        (line,) = error_lines(res.output)
        assert "every verdict of openai/j failed: 15 'no valid verdict:" in line
        assert "judge the run first" not in line


def test_metrics_of_an_unjudged_run_is_an_error_not_a_table_of_dashes(
    scripted_run: Path
) -> None:
    res = invoke("metrics", str(scripted_run))
    assert res.exit_code == 2
    (line,) = error_lines(res.output)
    assert "judge the run first" in line


def test_ctrl_c_stops_with_130_and_the_run_resumes(
    tmp_path: Path, fake_server: Callable[..., FakeServer]
) -> None:
    server = fake_server(latency_s=0.05, record=False)
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 7)])
    rd = tmp_path / "run"
    argv = generate_argv(server.base_url, data, rd, concurrency=1, conditions="direct")
    env = {**os.environ, "COLUMNS": "120"}
    # Ctrl-C must reach Python even if this test's parent ignores SIGINT
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                      signal.SIG_DFL))
    deadline = time.time() + 60
    while stored_turns(rd) < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before Ctrl-C"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    n = stored_turns(rd)
    assert 3 <= n < 30
    assert f"interrupted; {n} turns stored; run the same command to resume" in err
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert stored_turns(rd) == 30


def stored_labels(run_dir: Path) -> int:
    with sqlite3.connect(run_dir / "run.sqlite", timeout=1) as c:
        return int(c.execute("SELECT COUNT(label) FROM judgments").fetchone()[0])


def test_ctrl_c_while_judging_stops_with_130(scripted_run: Path,
                                             fake_server: Callable[..., FakeServer]) -> None:
    server = fake_server(responder=stance_judge, latency_s=0.05, record=False)
    argv = [sys.executable, "-m", "medpress.cli", "judge", str(scripted_run), "--judge",
            "openai/j", "--judge-base-url", server.base_url, "--judge-concurrency", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "120"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while stored_labels(scripted_run) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "judging finished before Ctrl-C"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    n = stored_labels(scripted_run)
    assert f"interrupted; {n} labels of openai/j stored; run the same command to resume" in err
    assert "Traceback" not in err


# -- options checked up front -------------------------------------------------------------------

@pytest.mark.parametrize(("option", "message"), [
    (["--concurrency", "0"], "--concurrency must be at least 1, not 0"),
    (["--temperature", "-1"], "--temperature must be at least 0, not -1.0"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1, not 0"),
    (["--conditions", ""], "--conditions names no condition"),
    (["--conditions", " , "], "--conditions names no condition"),
    (["--sample", "0"], "--sample must be at least 1, not 0"),
    (["--sample", "-1"], "--sample must be at least 1, not -1"),
    (["--limit", "0"], "--sample must be at least 1, not 0"),
    (["--sample", "5000"], "--sample 5000 is more than the 3 dialogues selected"),
    (["--ids", "MT-0003", "--sample", "2"], "--sample 2 is more than the 1 dialogues selected"),
])
def test_bad_generation_options_are_refused_before_the_run(
    tmp_path: Path, dataset: Path, option: list[str], message: str
) -> None:
    rd = tmp_path / "run"
    for cmd in (["generate"], ["run", "--judge", "scripted/always_safe"]):
        res = invoke(*cmd, "-m", "scripted/always_safe", "--dataset", str(dataset),
                     "--run-dir", str(rd), *option)
        assert res.exit_code == 2, res.output
        (line,) = error_lines(res.output)
        assert message in line
        assert not rd.exists()


def test_limit_is_an_alias_of_sample(tmp_path: Path, dataset: Path) -> None:
    res = invoke("generate", "-m", "scripted/always_safe", "--dataset", str(dataset),
                 "--conditions", "direct", "--limit", "2", "--run-dir", str(tmp_path / "run"))
    assert res.exit_code == 0, res.output
    assert "on 2 dialogues" in res.output


def test_judge_concurrency_zero_is_refused(tmp_path: Path, dataset: Path,
                                           scripted_run: Path) -> None:
    res = invoke("judge", str(scripted_run), "--judge", "scripted/always_safe",
                 "--concurrency", "0")
    assert res.exit_code == 2
    # --concurrency is the old name of --judge-concurrency on judge and judge-check
    assert "concurrency must be at least 1, not 0" in error_lines(res.output)[0]
    res = invoke("judge-check", "--judge", "scripted/always_safe", "--concurrency", "0",
                 "--dataset", str(dataset))
    assert res.exit_code == 2 and "concurrency must be at least 1, not 0" in res.output
    rd = tmp_path / "run2"
    res = invoke("run", "-m", "scripted/always_safe", "--judge", "scripted/always_safe",
                 "--judge-concurrency", "0", "--dataset", str(dataset), "--run-dir", str(rd))
    assert res.exit_code == 2
    assert "--judge-concurrency must be at least 1, not 0" in error_lines(res.output)[0]
    assert not rd.exists()


def test_misspelled_judge_lists_embedded(tmp_path: Path, dataset: Path,
                                         scripted_run: Path) -> None:
    res = invoke("judge", str(scripted_run), "--judge", "embdded")
    assert res.exit_code == 2
    (line,) = error_lines(res.output)
    assert "unknown judge spec 'embdded' (did you mean 'embedded'?)" in line
    assert "expected one of: embedded (the offline judge), openai/<model>" in line
    rd = tmp_path / "run2"
    res = invoke("run", "-m", "scripted/always_safe", "--judge", "embdded", "--dataset",
                 str(dataset), "--run-dir", str(rd))
    assert res.exit_code == 2 and "unknown judge spec 'embdded'" in res.output
    assert not rd.exists()  # refused before generating
    res = invoke("judge-check", "--judge", "nonsense")
    assert res.exit_code == 2 and "unknown judge spec 'nonsense'; expected" in res.output


def test_judge_base_url_with_no_openai_judge_is_refused(tmp_path: Path, dataset: Path,
                                                        scripted_run: Path) -> None:
    url = "http://127.0.0.1:9/v1"
    res = invoke("judge", str(scripted_run), "--judge", "embedded", "--judge-base-url", url)
    assert res.exit_code == 2
    (line,) = error_lines(res.output)
    assert "--judge-base-url applies to openai/ judges, and none of embedded is one" in line
    res = invoke("judge-check", "--judge", "embedded", "--judge-base-url", url)
    assert res.exit_code == 2 and "--judge-base-url applies to openai/ judges" in res.output
    rd = tmp_path / "run2"
    res = invoke("run", "-m", "scripted/always_safe", "--judge", "embedded", "--judge-base-url",
                 url, "--dataset", str(dataset), "--run-dir", str(rd))
    assert res.exit_code == 2 and not rd.exists()


def test_resume_with_other_dialogues_names_the_selection_options(tmp_path: Path,
                                                                 scripted_run: Path,
                                                                 dataset: Path) -> None:
    res = invoke("generate", "-m", "scripted/caves_at_2", "--dataset", str(dataset),
                 "--conditions", "direct", "--run-dir", str(scripted_run), "--sample", "2")
    assert res.exit_code == 2
    assert "dataset hash" not in res.output
    assert "the selected dialogues differ: stored 3 dialogues (" in res.output
    assert "), now 2 (" in res.output
    assert "check --sample/--ids/--starter/--dataset" in res.output


def test_export_format_is_case_insensitive(tmp_path: Path, scripted_run: Path) -> None:
    out = tmp_path / "e.csv"
    res = invoke("export", str(scripted_run), "--format", "CSV", "--out", str(out))
    assert res.exit_code == 0, res.output
    header = out.read_text().splitlines()[0]
    assert ",condition," in f",{header}," and not header.startswith("{")
