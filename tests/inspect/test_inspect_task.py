"""MedPRESS as an Inspect task: the same replies and the same judge give the same labels and
the same metrics through Inspect (mockllm, log file) as through ``medpress generate`` +
``medpress judge`` (scripted backend, run store). Offline: the judge is the fake server's toy
LLM judge on 127.0.0.1, and every mock output carries its usage (no tokenizer download)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.tool import ToolChoice, ToolInfo
from typer.testing import CliRunner

from medpress.backends import ChatRequest
from medpress.backends.scripted import SCRIPTED_FILE, ScriptedBackend
from medpress.cli import app
from medpress.cli.results import rows_from_runs
from medpress.inspect import is_inspect_log, medpress_task, read_log_labels
from medpress.judges import Judge, JudgeItem, Judgment
from medpress.metrics import LabelRow, compute_groups
from medpress.testing import FakeServer, toy_verdict

runner = CliRunner()
IDS = ("MT-0001", "SC-0001", "TR-0001")
CONDITIONS = ("direct", "persona")
# Safe at turn 1, gives way from turn 2 unless "evidence" is in its instructions: persona's
# framing has the word, direct's has not, so the two conditions differ.
BEHAVIOUR = "defended_by_evidence"
MODEL = "mockllm/model"
REPEATS = 2
# inspect-ai's own retry setup warns on every model it makes; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated")


def scripted_outputs() -> Any:
    """mockllm outputs: ``scripted/<BEHAVIOUR>``'s reply to the very messages Inspect sends,
    with usage set so mockllm counts no tokens."""
    backend = ScriptedBackend(BEHAVIOUR)

    def output(messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
               config: GenerateConfig) -> ModelOutput:
        text = backend.reply(ChatRequest(None, [{"role": m.role, "content": m.text}
                                                for m in messages]))
        out = ModelOutput.from_content(MODEL, text)
        n = len(text.split())
        out.usage = ModelUsage(input_tokens=7, output_tokens=n, total_tokens=7 + n)
        return out

    return output


def invoke(*args: str) -> Any:
    res = runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res


@dataclass(frozen=True)
class Both:
    log: EvalLog
    log_path: Path
    run_dir: Path


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Both]:
    """One Inspect eval and one MedPRESS run of the same dialogues, conditions, repeats,
    replies and judge."""
    tmp = tmp_path_factory.mktemp("inspect")
    server = FakeServer(judge=True).start()
    try:
        task = medpress_task(ids=",".join(IDS), conditions=list(CONDITIONS),
                             judge="openai/fake-judge", judge_base_url=server.base_url)
        [log] = inspect_eval(task, model=get_model(MODEL, custom_outputs=scripted_outputs()),
                             log_dir=str(tmp / "logs"), epochs=REPEATS, display="none")
        rd = tmp / "run"
        invoke("generate", "-m", f"scripted/{BEHAVIOUR}", "--ids", ",".join(IDS),
               "--conditions", ",".join(CONDITIONS), "--repeats", str(REPEATS),
               "--name", MODEL, "--run-dir", str(rd))
        invoke("judge", str(rd), "--judge", "openai/fake-judge", "--judge-base-url",
               server.base_url)
        yield Both(log, Path(log.location), rd)
    finally:
        server.stop()


def ordered(rows: list[LabelRow]) -> list[LabelRow]:
    return sorted(rows, key=lambda r: (r.condition, r.dialogue_id, r.repeat, r.turn))


def test_samples_replay_each_turn_and_carry_our_labels(both: Both) -> None:
    log = both.log
    assert log.status == "success"
    assert log.samples is not None
    assert {(s.id, s.epoch) for s in log.samples} == {
        (f"{d}:{c}", e) for d in IDS for c in CONDITIONS for e in range(1, REPEATS + 1)}
    for s in log.samples:
        dialogue_id, condition = str(s.id).split(":")
        assert s.metadata["condition"] == condition and s.metadata["dialogue_id"] == dialogue_id
        assert s.metadata["family"] == {"MT": "medication_treatment", "SC": "self_care",
                                        "TR": "symptom_triage"}[dialogue_id[:2]]
        assert s.target == s.metadata["card"]["safe_stance"]
        # the condition's framing as system message, then five user turns, five replies
        assert [m.role for m in s.messages] == ["system"] + ["user", "assistant"] * 5
        assert s.messages[0].text == s.metadata["system"]
        assert [m.text for m in s.messages if m.role == "user"] == [
            t["text"] for t in s.metadata["turns"]]
        [score] = s.scores.values()  # type: ignore[union-attr]
        want = ["SAFE"] * 5 if condition == "persona" else ["SAFE"] + ["UNSAFE"] * 4
        assert score.value == {f"t{n}": lab for n, lab in enumerate(want, 1)}
        assert score.metadata is not None
        assert score.metadata["repeat"] == s.epoch - 1
        assert score.metadata["judge"] == "openai/fake-judge"
        modes = [t["failure_mode"] for t in score.metadata["turns"]]
        assert [m is None for m in modes] == [lab == "SAFE" for lab in want]
        assert score.answer == s.messages[-1].text


def test_log_rows_and_metrics_equal_the_medpress_path(both: Both) -> None:
    from_log = read_log_labels(both.log_path)
    from_run = rows_from_runs([both.run_dir], None)
    assert from_log.model == MODEL and from_log.suite == "medpress" and not from_log.notes
    assert from_log.source.startswith("openai/fake-judge [rubric ")
    assert from_log.source.split(" (Inspect log")[0] == from_run.judge
    # the very same rows: labels, failure modes, repeats, lengths, families
    assert ordered(from_log.rows) == ordered(from_run.rows)
    assert len(from_log.rows) == len(IDS) * len(CONDITIONS) * REPEATS * 5
    log_groups = [g.to_dict() for g in compute_groups(from_log.rows, n_boot=200, seed=3)]
    run_groups = [g.to_dict() for g in compute_groups(from_run.rows, n_boot=200, seed=3)]
    assert log_groups == run_groups
    pooled = {g["condition"]: g for g in log_groups if g["family"] == "all"}
    assert (pooled["direct"]["UAR"], pooled["direct"]["SAR"], pooled["direct"]["ToF"]) == \
        (0.8, 0.2, 1.0)
    assert (pooled["persona"]["UAR"], pooled["persona"]["FR"], pooled["persona"]["ToF"]) == \
        (0.0, 0.0, 5.0)
    # Inspect's own metric is the same metrics layer's point estimates
    assert both.log.results is not None
    shown = both.log.results.scores[0].metrics
    for cond, g in pooled.items():
        for m in ("UAR", "SAR", "AR", "FR", "ToF", "NoF"):
            assert shown[f"{m}_{cond}"].value == pytest.approx(g[m])


def test_replies_equal_the_scripted_backend(both: Both) -> None:
    """The Inspect solver sent the prompts the runner sends: the scripted replies match."""
    import sqlite3

    with sqlite3.connect(both.run_dir / "run.sqlite") as c:
        stored = {(cond, rep, d, t): reply for cond, rep, d, t, reply in c.execute(
            "SELECT condition, repeat, dialogue_id, turn, reply FROM turns")}
    assert both.log.samples is not None
    got = {}
    for s in both.log.samples:
        d, cond = str(s.id).split(":")
        replies = [m.text for m in s.messages if m.role == "assistant"]
        got |= {(cond, s.epoch - 1, d, t): r for t, r in enumerate(replies, 1)}
    assert got == stored


def test_metrics_command_reads_the_log_like_the_run(both: Both) -> None:
    log_json = json.loads(invoke("metrics", str(both.log_path), "--json").stdout)
    run_json = json.loads(invoke("metrics", str(both.run_dir), "--json").stdout)
    assert log_json["groups"] == run_json["groups"]
    assert log_json["labels"] == f"{run_json['labels']} (Inspect log {both.log_path.name})"
    # the printed table is the same, below the line naming the labels' source
    log_text = invoke("metrics", str(both.log_path)).stdout.splitlines()
    run_text = invoke("metrics", str(both.run_dir)).stdout.splitlines()
    assert log_text[0].startswith("labels: openai/fake-judge") and "Inspect log" in log_text[0]
    assert log_text[1:] == run_text[1:]
    assert any("UAR" in line for line in log_text)
    # --labels takes a log as well
    assert json.loads(invoke("metrics", "--labels", str(both.log_path), "--json").stdout
                      )["groups"] == run_json["groups"]


def test_json_log_reads_and_json_label_files_still_do(both: Both, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    json_log = tmp_path / "log.json"
    write_eval_log(read_eval_log(str(both.log_path)), str(json_log), format="json")
    assert is_inspect_log(json_log) and is_inspect_log(both.log_path)
    assert ordered(read_log_labels(json_log).rows) == ordered(read_log_labels(both.log_path).rows)
    # a .json label file (JSON lines) is not a log and still reads as labels
    labels = tmp_path / "labels.json"
    labels.write_text("".join(json.dumps(
        {"model": "m", "condition": "direct", "dialogue_id": "MT-0001", "turn": t,
         "label": "UNSAFE" if t > 1 else "SAFE"}) + "\n" for t in range(1, 6)))
    assert not is_inspect_log(labels) and not is_inspect_log(tmp_path)
    got = json.loads(invoke("metrics", "--labels", str(labels), "--json").stdout)
    [pooled] = [g for g in got["groups"] if g["family"] == "all"]
    assert (pooled["UAR"], pooled["ToF"]) == (0.8, 1.0)


def test_a_log_without_medpress_scores_is_refused(tmp_path: Path) -> None:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import exact

    other = Task(dataset=[Sample(input="hi", target="x")], scorer=exact())
    out = ModelOutput.from_content(MODEL, "x")
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    [log] = inspect_eval(other, model=get_model(MODEL, custom_outputs=[out]),
                         log_dir=str(tmp_path), display="none")
    with pytest.raises(ValueError, match="no MedPRESS scores"):
        read_log_labels(Path(log.location))
    res = runner.invoke(app, ["metrics", log.location])
    assert res.exit_code == 2 and "no MedPRESS scores" in res.output  # clean_errors
    assert "Traceback" not in res.output


def test_registry_module_registers_the_task() -> None:
    """The installed ``inspect_ai`` entry point (pyproject.toml) makes the task resolvable, in
    a fresh process that imports nothing of ours, under Inspect's registry name
    ``medpress/medpress_task`` (what ``inspect eval medpress/medpress_task`` looks up), and
    creatable with ``-T``-style arguments."""
    code = (
        "from inspect_ai._util.registry import registry_info, registry_lookup\n"
        "from inspect_ai._eval.registry import task_create\n"
        "found = registry_lookup('task', 'medpress/medpress_task')\n"
        "print(registry_info(found).name)\n"
        "print(registry_lookup('scorer', 'medpress/medpress_scorer') is not None)\n"
        "t = task_create('medpress/medpress_task', ids='MT-0001', conditions='direct,persona',"
        " judge='openai/j', judge_base_url='http://127.0.0.1:9/v1')\n"
        "print(sorted(s.id for s in t.dataset))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.splitlines()
    assert out == ["medpress/medpress_task", "True", "['MT-0001:direct', 'MT-0001:persona']"]


def test_task_parameters() -> None:
    server = FakeServer(judge=True).start()
    try:
        kw: dict[str, Any] = {"judge": "openai/fake-judge", "judge_base_url": server.base_url}
        folded = medpress_task(ids="MT-0001", conditions="direct_anti", system_role=False, **kw)
        [s] = list(folded.dataset)
        assert s.id == "MT-0001:direct_anti"
        assert [m.role for m in s.input] == ["user"]  # type: ignore[union-attr]
        assert s.input[0].text.startswith("[Instructions]\n")  # type: ignore[index]
        default = medpress_task(sample=3, seed=1, **kw)
        assert len(default.dataset) == 3 * 4  # every condition by default
        assert {str(x.id).split(":")[1] for x in default.dataset} == {
            "direct", "persona", "direct_anti", "persona_anti"}
        with pytest.raises(ValueError, match="unknown condition"):
            medpress_task(ids="MT-0001", conditions="nope", **kw)
        with pytest.raises(ValueError, match="unknown dialogue ids: XX-1"):
            medpress_task(ids="XX-1", **kw)
        with pytest.raises(ValueError, match="did you mean 'embedded'"):
            medpress_task(ids="MT-0001", judge="embdded")
        with pytest.raises(ValueError, match="embedded judge exists only for the medpress"):
            medpress_task(suite="taf-med")
    finally:
        server.stop()


class ToyEmbedded(Judge):
    """Stands in for the embedded judge (which needs training): the toy keyword verdicts,
    with the helpfulness tag the embedded judge also gives."""

    name = "embedded-toy"
    rubric_version = "toy"
    made = 0
    closed = 0

    def __init__(self) -> None:
        ToyEmbedded.made += 1

    async def judge(self, item: JudgeItem) -> Judgment:
        v = toy_verdict(item.reply)
        return Judgment(item.key, v["label"], v["failure_mode"],
                        tags={"helpfulness": v["helpfulness"]})

    async def aclose(self) -> None:
        ToyEmbedded.closed += 1


def test_embedded_judge_is_made_once_and_its_tags_reach_the_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import medpress.judges.registry as registry

    monkeypatch.setattr(ToyEmbedded, "made", 0)
    monkeypatch.setattr(ToyEmbedded, "closed", 0)
    real = registry.get_judge
    monkeypatch.setattr(registry, "get_judge", lambda spec, **kw: ToyEmbedded()
                        if spec == "embedded" else real(spec, **kw))
    task = medpress_task(ids="MT-0001,SC-0001", conditions="direct,persona")
    [log] = inspect_eval(task, model=get_model(MODEL, custom_outputs=scripted_outputs()),
                         log_dir=str(tmp_path), display="none")
    assert log.status == "success"
    # one shared classifier for every sample, never closed mid-eval
    assert (ToyEmbedded.made, ToyEmbedded.closed) == (1, 0)
    rows = read_log_labels(Path(log.location)).rows
    assert len(rows) == 2 * 2 * 5
    assert {r.tags for r in rows} == {(("helpfulness", "SUBSTANTIVE"),)}
    direct = ordered([r for r in rows if r.condition == "direct" and r.dialogue_id == "MT-0001"])
    assert [r.label for r in direct] == ["SAFE"] + ["UNSAFE"] * 4


class RefusalJudge(Judge):
    """A stand-in LLM judge for the control suite: REFUSAL for a reply that declines."""

    name = "openai/control-toy"
    rubric_version = "control-toy"

    async def judge(self, item: JudgeItem) -> Judgment:
        refused = item.reply in yaml.safe_load(SCRIPTED_FILE.read_text())["refusal"]
        return Judgment(item.key, "REFUSAL" if refused else "SUBSTANTIVE")


def test_another_suite_runs_with_its_rubric_and_metrics(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import medpress.judges.registry as registry

    asked: list[dict[str, Any]] = []

    def fake(spec: str, **kw: Any) -> Judge:
        asked.append(kw)
        return RefusalJudge()

    monkeypatch.setattr(registry, "get_judge", fake)
    task = medpress_task(suite="control", sample=3, judge="openai/control-toy")
    assert asked[0]["rubric"].version == "control-1.0.0"  # the suite's rubric, not MedPRESS's
    refuse = ScriptedBackend("always_refuse")

    def output(messages: list[ChatMessage], *_: Any) -> ModelOutput:
        out = ModelOutput.from_content(MODEL, refuse.reply(ChatRequest(
            None, [{"role": m.role, "content": m.text} for m in messages])))
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    [log] = inspect_eval(task, model=get_model(MODEL, custom_outputs=output),
                         log_dir=str(tmp_path), display="none")
    assert log.status == "success" and log.results is not None
    shown = log.results.scores[0].metrics
    assert shown["refusal_rate_direct"].value == 1.0
    assert shown["substantive_rate_direct"].value == 0.0
    got = json.loads(invoke("metrics", log.location, "--json").stdout)
    assert got["suite"] == "control"
    [pooled] = [g for g in got["groups"] if g["stratum"] == "all"]
    assert (pooled["n_dialogues"], pooled["refusal_rate"]) == (3, 1.0)
