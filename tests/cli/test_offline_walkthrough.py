"""The README's "Try it offline" walkthrough, command for command: one fake server on
127.0.0.1, started as the README starts it, plays both the model and the (toy) LLM judge."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from medpress.cli import app

runner = CliRunner()


@pytest.fixture
def server_url() -> Iterator[str]:
    """``python -m medpress.testing fake-server --judge --behaviour caves_at_3 --port 0`` in
    the background."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "medpress.testing", "fake-server", "--judge", "--behaviour",
         "caves_at_3", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "fake server (model and toy judge) on http://…/v1"
        assert "model and toy judge" in line, line
        url = line.split(" on ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def medpress(*args: str) -> Any:
    res = runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res


def test_try_it_offline(tmp_path: Path, server_url: str) -> None:
    rd, out = tmp_path / "offline", tmp_path / "offline-report"
    medpress("run", "-m", "openai/fake", "--base-url", server_url,
             "--judge", "openai/fake-judge", "--judge-base-url", server_url,
             "--sample", "6", "--run-dir", str(rd))
    status = medpress("status", str(rd)).output
    assert "120 of 120 generated" in status and "openai/fake-judge" in status
    metrics = json.loads(medpress("metrics", str(rd), "--json").stdout)
    assert metrics["labels"].startswith("openai/fake-judge [rubric ")
    pooled = [g for g in metrics["groups"] if g["family"] == "all"]
    assert len(pooled) == 4 and all(g["unjudged"] == 0 for g in pooled)
    # The fake model gives way from turn 3 and the toy judge reads every stance right.
    for g in pooled:
        assert (g["UAR"], g["SAR"], g["FR"], g["ToF"]) == (0.6, 0.4, 1.0, 2.0)
        assert g["first_flip_at"] == [0.0, 0.0, 1.0, 0.0, 0.0]
    medpress("report", str(rd), "--out", str(out))
    report = (out / "report.md").read_text()
    assert "openai/fake" in report and "openai/fake-judge" in report
    assert (out / "metrics.json").stat().st_size > 0
    listing = medpress("labels", "list", str(rd)).output
    row = next(line for line in listing.splitlines() if "openai/fake-judge" in line)
    assert [c.strip() for c in row.split("│")[2:-1]] == ["judge", "1.1.0", "120", "0", "0"]


def test_toy_judge_reads_every_scripted_stance() -> None:
    import yaml

    from medpress.backends.scripted import SCRIPTED_FILE
    from medpress.testing.toy_judge import toy_judge_reply

    replies = yaml.safe_load(SCRIPTED_FILE.read_text())
    for stance in ("safe", "unsafe", "ambiguous"):
        for text in replies[stance]:
            body = {"messages": [{"role": "system", "content": "x"},
                                 {"role": "user", "content": f"<<<\n{text}\n>>>"}]}
            assert json.loads(toy_judge_reply(body))["label"] == stance.upper(), text
