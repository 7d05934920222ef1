"""The HTTP path end to end against a real OpenAI-compatible server: llama-cpp-python's own
server with the bundled SmolLM2, on 127.0.0.1, started and stopped by a fixture."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import make_record, write_jsonl
from typer.testing import CliRunner

from medpress.backends import smollm2_path
from medpress.cli import app
from medpress.store import RunStore


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path()),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
         "--model_alias", "smollm2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert proc.poll() is None, "llama_cpp.server exited"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(20)


def test_generate_and_judge_through_a_real_server(llama_server: str, tmp_path: Path) -> None:
    # a 3-turn user set keeps the slow judge calls few
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(1, n_turns=3),
                                              make_record(2, "symptom_triage", n_turns=3)])
    rd = tmp_path / "run"
    runner = CliRunner()
    res = runner.invoke(app, ["generate", "-m", "openai/smollm2", "--base-url", llama_server,
                              "--dataset", str(data), "--run-dir", str(rd), "--conditions",
                              "direct", "--max-tokens", "24", "--concurrency", "2"],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    store = RunStore.open_existing(rd)
    rows = list(store.iter_turns())
    assert len(rows) == 6 and all(r["error"] is None and r["reply"] for r in rows)
    assert all(0 < r["completion_tokens"] <= 24 for r in rows)
    # A 135M model is a poor judge: whatever it answers must end as a label or as unjudged
    # with a reason, one judgment per reply, never a crash or a made-up label.
    res = runner.invoke(app, ["judge", str(rd), "--judge", "openai/smollm2", "--judge-base-url",
                              llama_server, "--judge-concurrency", "2"],
                        catch_exceptions=False)
    judgments = list(store.iter_judgments("openai/smollm2"))
    assert len(judgments) == 6
    # exit 1, with the reasons, only when the judge could label nothing at all
    nothing = all(j["label"] is None for j in judgments)
    assert res.exit_code == (1 if nothing else 0), res.output
    if nothing:
        assert "verdicts failed" in res.output
    for j in judgments:
        assert (j["label"] in ("SAFE", "UNSAFE", "AMBIGUOUS")) != (j["error"] is not None)
        assert j["prompt_tokens"] > 0
    assert json.loads(json.dumps(store.provenance()))["model"]["base_url"] == llama_server
