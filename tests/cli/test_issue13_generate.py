"""Issue 13 (``medpress generate``): warnings and one-line refusals before a run goes wrong."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_record, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.testing import FakeServer

runner = CliRunner()


def generate(*args: str) -> Any:
    return runner.invoke(app, ["generate", *args], catch_exceptions=False)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "d.jsonl", [make_record(i) for i in range(1, 4)])


def test_repeats_at_temperature_zero_warn(dataset: Path, tmp_path: Path) -> None:
    common = ["-m", "scripted/always_safe", "--dataset", str(dataset), "--conditions", "direct",
              "--repeats", "2"]
    res = generate(*common, "--run-dir", str(tmp_path / "a"))
    assert res.exit_code == 0, res.output
    assert "warning:" in res.output and "--repeats 2 at --temperature 0" in res.output
    res = generate(*common, "--temperature", "0.7", "--run-dir", str(tmp_path / "b"))
    assert res.exit_code == 0 and "warning:" not in res.output
    res = generate("-m", "scripted/always_safe", "--dataset", str(dataset), "--conditions",
                   "direct", "--run-dir", str(tmp_path / "c"))
    assert res.exit_code == 0 and "warning:" not in res.output


def test_a_condition_listed_twice_is_refused_before_the_run(dataset: Path,
                                                            tmp_path: Path) -> None:
    rd = tmp_path / "run"
    res = generate("-m", "scripted/always_safe", "--dataset", str(dataset), "--conditions",
                   "direct,persona,direct", "--run-dir", str(rd))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "listed more than once in --conditions: direct" in res.output
    assert not rd.exists()


def test_reasoning_for_a_backend_without_a_switch_is_refused(dataset: Path,
                                                             tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    for model in ("scripted/always_safe", f"llamacpp/{gguf}"):
        rd = tmp_path / "run"
        res = generate("-m", model, "--dataset", str(dataset), "--reasoning", "on",
                       "--run-dir", str(rd))
        assert res.exit_code == 2, res.output
        assert f"--reasoning on: {model} has no way to switch reasoning" in res.output
        assert not rd.exists()


def no_such_model(body: dict[str, Any]) -> str:
    return f"The model `{body['model']}` does not exist."


def test_first_request_refused_is_one_line_and_the_run_resumes(
    dataset: Path, tmp_path: Path, fake_server: Callable[..., FakeServer]
) -> None:
    bad, good = fake_server(reject=no_such_model), fake_server()
    rd = tmp_path / "run"
    args = ["-m", "openai/nope", "--dataset", str(dataset), "--run-dir", str(rd),
            "--concurrency", "2"]
    res = generate(*args, "--base-url", bad.base_url)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "openai/nope refused the run's first request (http_400)" in res.output
    assert "does not exist" in res.output and len(bad.requests) <= 2
    res = generate(*args, "--base-url", good.base_url)
    assert res.exit_code == 0, res.output
    assert len(good.requests) == 3 * 4 * 5


def test_summary_counts_empty_and_truncated_replies(dataset: Path, tmp_path: Path) -> None:
    res = generate("-m", "scripted/truncated", "--dataset", str(dataset), "--conditions",
                   "direct", "--run-dir", str(tmp_path / "run"))
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if "empty / truncated" in ln)
    assert "0 / 15" in line
