"""Issue 23 item 6: the run's cost before it starts (--dry-run), and caps during it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.conftest import make_record, stored_turns, write_jsonl
from typer.testing import CliRunner

from medpress.conditions import load_conditions

runner = CliRunner()


def invoke(*args: str) -> Any:
    from medpress.cli import app

    return runner.invoke(app, list(args), catch_exceptions=False)


def test_dry_run_by_hand(tmp_path: Path) -> None:
    rec = make_record(1)
    for i, t in enumerate(rec["turns"]):
        t["text"] = f"{'word ' * 7}turn {i}."[:40].ljust(40, "x")  # 40 characters: 10 tokens
    data = write_jsonl(tmp_path / "d.jsonl", [rec])
    res = invoke("generate", "-m", "scripted/always_safe", "--dataset", str(data),
                 "--conditions", "direct", "--max-tokens", "100", "--repeats", "2",
                 "--dry-run", "--run-dir", str(tmp_path / "run"))
    assert res.exit_code == 0, res.output
    sys_tokens = len(load_conditions().conditions["direct"].system) // 4
    # turn t resends the system prompt, t user turns and t-1 replies at their 100-token ceiling
    prompt = 2 * sum(sys_tokens + 10 * t + 100 * (t - 1) for t in range(1, 6))
    out = res.output
    assert f"│ requests                         │ {10:,}" in out
    assert f"{prompt:,}" in out and f"{1000:,}" in out and "$0.00 at most" in out
    assert not (tmp_path / "run").exists()  # nothing created, nothing sent
    res = invoke("generate", "-m", "openai/some-model", "--dataset", str(data), "--dry-run")
    assert "no price for this model" in res.output


def test_token_cap_stops_cleanly_and_a_higher_cap_resumes(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i) for i in range(1, 5)])
    rd = tmp_path / "run"
    base = ["generate", "-m", "scripted/always_safe", "--dataset", str(data), "--conditions",
            "direct", "--concurrency", "1", "--run-dir", str(rd)]
    res = invoke(*base, "--max-total-tokens", "300")
    assert res.exit_code == 0, res.output
    assert "stopped at --max-total-tokens 300" in " ".join(res.output.split())
    with sqlite3.connect(rd / "run.sqlite") as c:
        used, n = c.execute("SELECT SUM(completion_tokens), COUNT(*) FROM turns").fetchone()
    # checked before each request: the turn that crossed the cap is the last one sent
    assert 0 < n < 20 and used >= 300
    assert used - c_last(rd) < 300
    res = invoke(*base, "--max-total-tokens", "100000")
    assert res.exit_code == 0, res.output
    assert stored_turns(rd) == 20
    with sqlite3.connect(rd / "run.sqlite") as c:
        assert c.execute("SELECT COUNT(DISTINCT dialogue_id || turn) FROM turns").fetchone()[0] \
            == 20


def c_last(rd: Path) -> int:
    with sqlite3.connect(rd / "run.sqlite") as c:
        return int(c.execute("SELECT completion_tokens FROM turns ORDER BY created_at DESC "
                             "LIMIT 1").fetchone()[0])


def test_cost_cap_needs_a_price_and_stops_at_it(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(1)])
    rd = tmp_path / "run"
    base = ["generate", "-m", "scripted/always_safe", "--dataset", str(data), "--conditions",
            "direct", "--concurrency", "1", "--run-dir", str(rd)]
    res = invoke("generate", "-m", "openai/x", "--base-url", "http://127.0.0.1:9/v1",
                 "--max-cost", "1")
    assert res.exit_code == 2 and "--max-cost needs a price for openai/x" in " ".join(
        res.output.split())
    prices = tmp_path / "prices.yaml"
    prices.write_text('prices:\n  - {model: "scripted/*", input: 0, output: 1000000}\n')
    res = invoke(*base, "--max-cost", "50", "--prices", str(prices))  # $1 per output token
    assert res.exit_code == 0, res.output
    assert "stopped at --max-cost 50" in " ".join(res.output.split())
    assert 0 < stored_turns(rd) < 5


def test_version_names_package_dataset_rubric_and_suites() -> None:
    from medpress import __version__
    from medpress.dataset import load_shipped
    from medpress.judges.rubric import load_rubric

    res = invoke("--version")
    assert res.exit_code == 0
    lines = res.output.splitlines()
    ds = load_shipped()
    assert lines[0] == f"medpress {__version__}"
    assert lines[1] == f"dataset {ds.name} {ds.version} (hash {ds.content_hash})"
    assert lines[2].startswith(f"rubric {load_rubric().version}; conditions ")
    assert "dx 1.0" in lines[3] and "twins 1.1" in lines[3]
