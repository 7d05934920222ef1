"""Security basics: the API key never reaches a file or the console, run-dir names from model
specs cannot escape runs/, and text from models and users is stored and passed on as data."""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from tests.conftest import judged_reply, make_record, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.testing import FakeServer

FAMS = ["medication_treatment", "self_care", "symptom_triage"]
HOSTILE = ("{{ 7*7 }} {% raw %}$(touch PWNED) `touch PWNED` '; DROP TABLE turns; -- "
           "<script>alert(1)</script> | cell | ${HOME} %s {0}")


def hostile_reply(body: dict[str, Any]) -> str:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return f"Reply to turn {len(users)}: {HOSTILE}"


def judge_reply(body: dict[str, Any]) -> str:
    reply = judged_reply(body)
    return json.dumps({"label": "UNSAFE" if "turn 4" in reply or "turn 5" in reply else "SAFE",
                       "failure_mode": "direct_capitulation" if "turn 4" in reply
                       or "turn 5" in reply else None,
                       "evidence": reply[:20], "rationale": "x", "helpfulness": "SUBSTANTIVE"})


class KeyEchoingServer(FakeServer):
    """A badly behaved server whose 401 body repeats the Authorization header it was sent."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.json_response(
            {"error": {"message": f"Incorrect API key: {request.headers.get('Authorization')}"}},
            status=401)


def files_under(*roots: Path) -> list[Path]:
    return [p for r in roots for p in r.rglob("*") if p.is_file()]


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    key = "sk-medpress-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


def test_api_key_never_written_or_printed(
    tmp_path: Path, secret: str, fake_server: Callable[..., FakeServer]
) -> None:
    recs = [make_record(i, FAMS[i % 3]) for i in range(1, 7)]
    recs[0]["turns"][1]["text"] = f"user says {HOSTILE} and more words here"
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    model = fake_server(responder=hostile_reply)
    judge = fake_server(responder=judge_reply)
    rd, exports, report = tmp_path / "run", tmp_path / "exports", tmp_path / "report"
    exports.mkdir()
    cli = CliRunner()
    outputs: list[str] = []

    def invoke(*args: str) -> str:
        res = cli.invoke(app, list(args), catch_exceptions=False)
        assert res.exit_code == 0, res.output
        outputs.append(res.output)
        return res.output

    invoke("generate", "-m", "openai/m", "--base-url", model.base_url, "--dataset", str(data),
           "--run-dir", str(rd), "--conditions", "direct,persona")
    invoke("judge", str(rd), "--judge", "openai/j", "--judge-base-url", judge.base_url)
    invoke("metrics", str(rd), "--n-boot", "50")
    invoke("metrics", str(rd), "--json", "--n-boot", "50")
    for fmt in ("jsonl", "csv"):
        invoke("export", str(rd), "--format", fmt, "--out", str(exports / f"run.{fmt}"))
    outputs.append(cli.invoke(app, ["export", str(rd)], catch_exceptions=False).output)
    invoke("report", str(rd), "--out", str(report), "--n-boot", "50")
    invoke("disagreements", str(rd))
    # the real process too: its stdout and stderr, warnings and all
    proc = subprocess.run(
        [sys.executable, "-m", "medpress.cli", "generate", "-m", "openai/m", "--base-url",
         model.base_url, "--dataset", str(data), "--run-dir", str(tmp_path / "run2"),
         "--conditions", "direct"], capture_output=True, text=True,
        env={**os.environ, "PYTHONWARNINGS": "always"})
    assert proc.returncode == 0, proc.stderr
    outputs += [proc.stdout, proc.stderr]
    # a server that echoes the key in its error body: the stored error is redacted
    echo = KeyEchoingServer().start()
    try:
        res = cli.invoke(app, ["generate", "-m", "openai/m", "--base-url", echo.base_url,
                               "--dataset", str(data), "--run-dir", str(tmp_path / "run401"),
                               "--conditions", "direct"], catch_exceptions=False)
        outputs.append(res.output)
        # refused at the first request: one redacted error line, nothing stored
        assert res.exit_code == 2 and "Incorrect API key: Bearer [redacted]" in res.output
        res = cli.invoke(app, ["judge", str(rd), "--judge", "openai/j2", "--judge-base-url",
                               echo.base_url], catch_exceptions=False)
        outputs.append(res.output)
    finally:
        echo.stop()

    # the key was really in use: every server saw it in the header, and only there
    assert model.auth_headers and all(h == f"Bearer {secret}" for h in model.auth_headers)
    assert all(h == f"Bearer {secret}" for h in judge.auth_headers)
    assert not any(secret in json.dumps(b) for b in model.requests + judge.requests)

    scanned = files_under(rd, exports, report, tmp_path / "run2", tmp_path / "run401")
    assert any(p.name == "run.sqlite" for p in scanned) and any(p.suffix == ".png"
                                                                for p in scanned)
    assert any(p.name == "report.md" for p in scanned)
    key = secret.encode()
    leaks = [str(p) for p in scanned if key in p.read_bytes()]
    assert not leaks
    assert all(secret not in out for out in outputs)
    # the refused run stored no turn (so it resumes once the key is fixed)
    with sqlite3.connect(tmp_path / "run401" / "run.sqlite") as c:
        assert c.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 0


def test_model_and_user_text_is_data(
    tmp_path: Path, secret: str, fake_server: Callable[..., FakeServer]
) -> None:
    recs = [make_record(i, FAMS[i % 3]) for i in range(1, 4)]
    recs[0]["turns"][0]["text"] = f"user asks {HOSTILE} with more words"
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    model = fake_server(responder=hostile_reply)
    judge = fake_server(responder=judge_reply)
    rd = tmp_path / "run"
    cli = CliRunner()
    for args in (["generate", "-m", "openai/m", "--base-url", model.base_url, "--dataset",
                  str(data), "--run-dir", str(rd), "--conditions", "direct"],
                 ["judge", str(rd), "--judge", "openai/j", "--judge-base-url", judge.base_url],
                 ["export", str(rd), "--format", "jsonl", "--out", str(tmp_path / "e.jsonl")],
                 ["report", str(rd), "--out", str(tmp_path / "rep"), "--n-boot", "20"]):
        res = cli.invoke(app, args, catch_exceptions=False)
        assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert len(rows) == 15
    assert all(r["reply"] == f"Reply to turn {r['turn']}: {HOSTILE}" for r in rows)
    first = next(r for r in rows if r["dialogue_id"] == recs[0]["id"] and r["turn"] == 1)
    assert first["user"] == f"user asks {HOSTILE} with more words"
    # the judge was shown the text verbatim: no template, shell or format evaluation
    prompts = [m["content"] for b in judge.requests for m in b["messages"]]
    assert any(HOSTILE in p for p in prompts)
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()


@pytest.mark.parametrize("spec", ["openai/../../x", "openai/..", "openai//etc/passwd",
                                  "openai/a/../../../b", "openai/..\\..\\y", "openai/~/.ssh"])
def test_run_dir_from_spec_stays_inside_runs(
    tmp_path: Path, spec: str, monkeypatch: pytest.MonkeyPatch,
    fake_server: Callable[..., FakeServer]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(1)])
    server = fake_server(record=False)
    res = CliRunner().invoke(app, ["generate", "-m", spec, "--base-url", server.base_url,
                                   "--dataset", str(data), "--conditions", "direct"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    made = [p for p in tmp_path.rglob("*") if p.is_dir()]
    runs = work / "runs"
    assert all(p == runs or p.resolve().parent == runs.resolve() for p in made if p != work)
    (run,) = runs.iterdir()
    assert (run / "run.sqlite").is_file()
    assert ".." not in run.name and "/" not in run.name and "\\" not in run.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "work"]
