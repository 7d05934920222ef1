"""Reports over several runs: display names, judges named, incomplete runs counted."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_cli import FAMS, invoke, runner, stance_judge
from tests.conftest import make_record, write_jsonl

from medpress.cli import app
from medpress.testing import FakeServer


def thinking_caves(body: dict[str, Any]) -> str:
    """With reasoning on, the fake model gives way from turn 2; with it off it holds."""
    thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking")
    users = sum(m["role"] == "user" for m in body["messages"])
    if thinking and users >= 2:
        return "Fair enough, that should be fine for you."
    return "I would not do that; please see a clinician today."


@pytest.fixture
def runs(tmp_path: Path, fake_server: Callable[..., FakeServer]) -> tuple[Path, Path, str]:
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i, FAMS[i % 3]) for i in range(1, 7)])
    model = fake_server(responder=thinking_caves)
    judge = fake_server(responder=stance_judge)
    dirs = []
    for mode in ("on", "off"):
        rd = tmp_path / f"run-{mode}"
        res = invoke("generate", "-m", "openai/fake", "--base-url", model.base_url,
                     "--reasoning", mode, "--dataset", str(data), "--conditions", "direct",
                     "--run-dir", str(rd))
        assert res.exit_code == 0, res.output
        dirs.append(rd)
    for rd, name in zip(dirs, ("openai/j", "openai/k"), strict=True):
        res = invoke("judge", str(rd), "--judge", name, "--judge-base-url", judge.base_url)
        assert res.exit_code == 0, res.output
    return dirs[0], dirs[1], judge.base_url


def test_two_runs_of_one_spec_get_two_named_rows(runs: tuple[Path, Path, str],
                                                 tmp_path: Path) -> None:
    on, off, judge_url = runs
    invoke("judge", str(on), "--judge", "openai/k", "--judge-base-url", judge_url)
    out = tmp_path / "rep"
    res = invoke("report", str(on), str(off), "--judge", "openai/k", "--out", str(out))
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    pooled = {g["model"]: g for g in metrics["groups"] if g["family"] == "all"}
    assert set(pooled) == {"openai/fake (reasoning=on)", "openai/fake (reasoning=off)"}
    assert pooled["openai/fake (reasoning=on)"]["UAR"] == pytest.approx(0.8)
    assert pooled["openai/fake (reasoning=off)"]["UAR"] == 0.0
    assert pooled["openai/fake (reasoning=on)"]["ToF"] == pytest.approx(1.0)  # turns held
    assert pooled["openai/fake (reasoning=off)"]["ToF"] == pytest.approx(5.0)
    text = (out / "report.md").read_text()
    assert "| openai/fake (reasoning=on) | direct |" in text
    assert "Warning" not in text
    assert "openai/k [rubric " in metrics["judge"]  # the rubric version is always shown


def test_runs_labelled_by_different_judges_are_flagged(runs: tuple[Path, Path, str],
                                                       tmp_path: Path) -> None:
    on, off, _ = runs
    out = tmp_path / "rep"
    res = invoke("report", str(on), str(off), "--out", str(out))
    assert res.exit_code == 0, res.output
    text = (out / "report.md").read_text()
    assert "labelled by different judges" in text
    assert text.count("**Warning:** these runs were labelled by different judges") == 2
    notes = json.loads((out / "metrics.json").read_text())["notes"]
    assert "openai/j" in notes[0] and "openai/k" in notes[0]


def test_partly_generated_run_keeps_dataset_length(runs: tuple[Path, Path, str]) -> None:
    on, _, _ = runs
    # As if generation of one dialogue had stopped after turn 2.
    with sqlite3.connect(on / "run.sqlite") as c:
        c.execute("DELETE FROM turns WHERE dialogue_id = 'MT-0003' AND turn > 2")
        c.execute("DELETE FROM judgments WHERE dialogue_id = 'MT-0003' AND turn > 2")
    out = json.loads(invoke("metrics", str(on), "--json", "--n-boot", "0").output)
    g = next(x for x in out["groups"] if x["family"] == "all")
    assert g["not_generated"] == 3 and g["unjudged"] == 3
    assert len(g["UAR_at"]) == 5
    assert g["ToF"] == pytest.approx(1.0)  # MT-0003 flipped at turn 2 either way
    assert any("27 of 30 turns generated" in n for n in out["notes"])


def test_label_file_takes_lengths_from_the_dataset(tmp_path: Path) -> None:
    rows = [{"model": "m", "condition": "direct", "dialogue_id": did, "family": "self_care",
             "turn": t, "label": "SAFE"} for did in ("MT-0001", "XX-1") for t in (1, 2)]
    f = tmp_path / "l.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = json.loads(invoke("metrics", "--labels", str(f), "--json", "--n-boot", "0").output)
    g = next(x for x in out["groups"] if x["family"] == "all")
    # MT-0001 has 5 turns in the shipped set: held 5; XX-1 is unknown: its T is 2.
    assert g["ToF"] == pytest.approx((5 + 2) / 2) and g["not_generated"] == 3
    assert out["notes"] == ["1 dialogue id(s) in " + str(f) + " are not in the dataset and have "
                            "no n_turns column: their length is taken as the highest turn "
                            "present"]


def test_name_option_sets_the_display_name(runs: tuple[Path, Path, str], tmp_path: Path,
                                           fake_server: Callable[..., FakeServer]) -> None:
    on, _, judge_url = runs
    model = fake_server(responder=thinking_caves)
    # Resuming a finished run with --name only renames it.
    res = invoke("generate", "-m", "openai/fake", "--base-url", model.base_url, "--reasoning",
                 "on", "--dataset", str(tmp_path / "d.jsonl"), "--conditions", "direct",
                 "--run-dir", str(on), "--name", "Qwen3 thinking")
    assert res.exit_code == 0, res.output
    invoke("judge", str(on), "--judge", "openai/k", "--judge-base-url", judge_url)
    out = json.loads(invoke("metrics", str(on), "--json", "--judge", "openai/k",
                            "--n-boot", "0").output)
    assert {g["model"] for g in out["groups"]} == {"Qwen3 thinking"}


def test_llamacpp_runs_are_named_by_file_name() -> None:
    from medpress.cli.common import default_run_dir, short_spec

    assert short_spec("llamacpp//home/me/models/qwen3-8b-q4.gguf") == "llamacpp/qwen3-8b-q4.gguf"
    assert short_spec("openai/Qwen/Qwen3-32B") == "openai/Qwen/Qwen3-32B"
    name = default_run_dir("llamacpp//home/me/models/qwen3-8b-q4.gguf").name
    assert name.startswith("llamacpp_qwen3-8b-q4.gguf-") and "home" not in name


def test_report_refuses_a_run_without_labels_beside_others(
    runs: tuple[Path, Path, str], tmp_path: Path, fake_server: Callable[..., FakeServer]
) -> None:
    on, _, _ = runs
    model = fake_server(responder=thinking_caves)
    bare = tmp_path / "bare"
    invoke("generate", "-m", "openai/other", "--base-url", model.base_url, "--dataset",
           str(tmp_path / "d.jsonl"), "--conditions", "direct", "--run-dir", str(bare))
    res = runner.invoke(app, ["report", str(on), str(bare), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert f"no labels in {bare}: judge the run first" in res.output
    assert "leave these runs out of the report" in res.output


def test_empty_and_cut_off_replies_are_reported(runs: tuple[Path, Path, str]) -> None:
    _, off, _ = runs
    with sqlite3.connect(off / "run.sqlite") as c:
        c.execute("UPDATE turns SET finish_reason = 'length' WHERE turn = 5")
        c.execute("UPDATE turns SET reply = '' WHERE dialogue_id = 'MT-0003' AND turn = 1")
    out = json.loads(invoke("metrics", str(off), "--json", "--n-boot", "0").output)
    assert any("1 replies are empty" in n for n in out["notes"])
    assert any("6 replies were cut off at the token limit" in n for n in out["notes"])
