"""``medpress sweep``: a study from one file, killed part-way and resumed, with its leaderboard.

Models are fake OpenAI servers replying as scripted baselines, two replicas each; the judge
is the toy rubric judge of another fake server (offline, nothing to train).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import stored_rows, stored_turns
from typer.testing import CliRunner

from medpress.backends import GenerateConfig
from medpress.cli import app
from medpress.cli.results import rows_from_runs
from medpress.runner.sweep import STATE_FILE, expand, load_sweep, looks_like_secret
from medpress.store import RunStore
from medpress.testing import FakeServer
from medpress.testing.fake_server import scripted_responder

BEHAVIOURS = ("always_safe", "caves_at_3", "always_unsafe")
DIALOGUES, CONDITIONS, REPEATS, TURNS = 3, 4, 2, 5
ENV = {**os.environ, "COLUMNS": "200", "SWEEP_TEST_KEY": "local-test-key"}
EXAMPLE = Path(__file__).parents[2] / "examples" / "sweep.toml"
runner = CliRunner()


def write_sweep(path: Path, models: dict[str, list[str]], judge_url: str,
                extra_run: str = "") -> Path:
    lines = ["[run]", 'conditions = ["direct", "persona", "direct_anti", "persona_anti"]',
             f"sample = {DIALOGUES}", f"repeats = {REPEATS}", "temperature = 0.5",
             "concurrency = 2", "judge_concurrency = 8", "n_boot = 50", extra_run, ""]
    for name, urls in models.items():
        lines += ["[[models]]", f'spec = "openai/{name}"', f'name = "{name}"',
                  f"base_urls = {json.dumps(urls)}", 'api_key_env = "SWEEP_TEST_KEY"', ""]
    lines += ["[[judges]]", 'spec = "openai/toy-judge"', f'base_url = "{judge_url}"']
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def servers(fake_server: Callable[..., FakeServer]) -> dict[str, list[FakeServer]]:
    """Two replicas per scripted baseline (a little latency, so a run can be killed while it
    generates) and the toy judge under the key ``judge``."""
    out = {b: [fake_server(responder=scripted_responder(b), latency_s=0.02) for _ in range(2)]
           for b in BEHAVIOURS}
    out["judge"] = [fake_server(judge=True)]
    return out


@pytest.fixture
def config(tmp_path: Path, servers: dict[str, list[FakeServer]]) -> Path:
    return write_sweep(tmp_path / "study.toml",
                       {b: [s.base_url for s in servers[b]] for b in BEHAVIOURS},
                       servers["judge"][0].base_url)


def sweep_argv(config: Path, out: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "medpress.cli", "sweep", str(config), "--out", str(out),
            *more]


def requests_served(servers: dict[str, list[FakeServer]]) -> int:
    return sum(len(s.requests) for group in servers.values() for s in group)


def label_rows(out: Path) -> dict[str, list[tuple[object, ...]]]:
    got = {}
    for b in BEHAVIOURS:
        rows = rows_from_runs([out / b / "medpress"], None).rows
        got[b] = sorted((r.model, r.condition, r.dialogue_id, r.repeat, r.turn, r.label)
                        for r in rows)
    return got


def test_killed_sweep_resumes_to_the_uninterrupted_result(
        tmp_path: Path, config: Path, servers: dict[str, list[FakeServer]]) -> None:
    # the reference: one uninterrupted sweep
    ref = tmp_path / "ref"
    res = runner.invoke(app, ["sweep", str(config), "--out", str(ref)], env=ENV,
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output

    # the same sweep, SIGKILLed while its second cell generates, then the same command again
    out = tmp_path / "killed"
    proc = subprocess.Popen(sweep_argv(config, out), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=ENV)
    second = out / "caves_at_3" / "medpress"
    deadline = time.time() + 60
    while stored_turns(second) < 10 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    total = DIALOGUES * CONDITIONS * REPEATS * TURNS
    killed_at = stored_turns(second)
    assert 10 <= killed_at < total
    assert stored_turns(out / "always_unsafe" / "medpress") == 0
    state = json.loads((out / STATE_FILE).read_text())["done"]
    assert list(state) == ["always_safe/medpress"]  # the first cell finished, nothing else
    assert not (out / "report").exists()

    done = subprocess.run(sweep_argv(config, out), capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    assert "1 finished before, reused; 2 to run" in done.stdout
    assert re.search(rf"turns already stored\s+│\s+{killed_at}\s", done.stdout), done.stdout

    # nothing lost, nothing redone differently: the same transcripts and the same labels
    for b in BEHAVIOURS:
        assert stored_rows(out / b / "medpress") == stored_rows(ref / b / "medpress"), b
        assert len(stored_rows(out / b / "medpress")) == total
        assert RunStore.open_existing(out / b / "medpress").get_meta("name") == b
    assert label_rows(out) == label_rows(ref)

    # the leaderboard ranks the three models by what they did
    metrics = json.loads((out / "report" / "metrics.json").read_text())
    pooled = [g for g in metrics["groups"] if g["family"] == "all"]
    assert len(pooled) == 3 * CONDITIONS
    uar = {(g["model"], g["condition"]): g["UAR"] for g in pooled}
    for cond in ("direct", "persona", "direct_anti", "persona_anti"):
        assert (uar["always_safe", cond], uar["caves_at_3", cond],
                uar["always_unsafe", cond]) == (0.0, 0.6, 1.0)
    report = (out / "report" / "report.md").read_text()
    board = report.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    ranked = [line.split("|")[2].strip() for line in board.splitlines()
              if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    assert ranked == [b for b in BEHAVIOURS for _ in range(CONDITIONS)]
    assert "Leaderboard" in done.stdout and "| 1 | always_safe |" in done.stdout

    # every model's requests were spread over its two replicas, each sent with the key
    # from the variable named in api_key_env
    for b in BEHAVIOURS:
        assert all(s.requests for s in servers[b]), b
        assert set(servers[b][0].auth_headers) == {"Bearer local-test-key"}

    # a finished sweep run again reuses every cell: no request, the same rows
    before = requests_served(servers)
    rows_before = {b: stored_rows(out / b / "medpress") for b in BEHAVIOURS}
    again = runner.invoke(app, ["sweep", str(config), "--out", str(out)], env=ENV,
                          catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert "3 finished before, reused; 0 to run" in again.output
    assert requests_served(servers) == before
    assert {b: stored_rows(out / b / "medpress") for b in BEHAVIOURS} == rows_before


def test_dry_run_prints_cells_and_requests_and_writes_nothing(
        tmp_path: Path, config: Path, servers: dict[str, list[FakeServer]]) -> None:
    out = tmp_path / "dry"
    res = runner.invoke(app, ["sweep", str(config), "--out", str(out), "--dry-run"],
                        env=ENV, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    n = len(BEHAVIOURS) * DIALOGUES * CONDITIONS * REPEATS * TURNS
    assert n == 360
    assert f"requests: {n} model requests in all, {n} in cells still to run" in res.output
    for i, b in enumerate(BEHAVIOURS, 1):
        row = next(line for line in res.output.splitlines() if f" {b} " in line)
        assert row.split("│")[1].strip() == str(i)
        assert "3 × 4 × 2" in row and "120" in row and "to run" in row
    assert not out.exists()
    assert requests_served(servers) == 0


def test_display_names_give_run_directories_and_suites_their_conditions(
        tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("""
[run]
suites = ["medpress", "twins", "control"]
conditions = ["direct", "persona"]
suite_conditions = { control = ["direct"] }
out = "study"

[[models]]
spec = "openai/Qwen/Qwen3-8B"
name = "Qwen3 8B (think)"
base_url = "http://gpu1:8000/v1"
base_urls = ["http://gpu2:8000/v1"]
reasoning = true
max_tokens = 4096

[[models]]
spec = "scripted/always_safe"

[[judges]]
spec = "embedded"
suites = ["medpress"]

[[judges]]
spec = "openai/judge"
base_url = "http://127.0.0.1:9/v1"
""")
    sweep = load_sweep(path)
    assert sweep.default_out == tmp_path / "study"  # relative to the sweep file
    cells = expand(sweep, sweep.default_out)
    assert [(c.index, c.run_dir.relative_to(tmp_path).as_posix(), c.conditions,
             [j.spec for j in c.judges]) for c in cells] == [
        (1, "study/Qwen3_8B_think/medpress", ("direct", "persona"), ["embedded", "openai/judge"]),
        (2, "study/Qwen3_8B_think/twins", ("direct", "persona"), ["openai/judge"]),
        (3, "study/Qwen3_8B_think/control", ("direct",), ["openai/judge"]),
        (4, "study/scripted_always_safe/medpress", ("direct", "persona"),
         ["embedded", "openai/judge"]),
        (5, "study/scripted_always_safe/twins", ("direct", "persona"), ["openai/judge"]),
        (6, "study/scripted_always_safe/control", ("direct",), ["openai/judge"])]
    qwen, safe = cells[0], cells[3]
    assert qwen.model.urls == ("http://gpu1:8000/v1", "http://gpu2:8000/v1")
    assert (qwen.reasoning, qwen.max_tokens, safe.reasoning, safe.max_tokens) == (
        "on", 4096, None, GenerateConfig.max_tokens)
    assert (qwen.model.display_name, safe.model.display_name) == (
        "Qwen3 8B (think)", "scripted/always_safe")
    # the fingerprint follows what the cell holds, not where it is or how fast it runs
    run = sweep.config.run
    faster = run.model_copy(update={"concurrency": 99, "n_boot": 5})
    assert qwen.fingerprint(run) == qwen.fingerprint(faster)
    assert qwen.fingerprint(run) != qwen.fingerprint(run.model_copy(update={"repeats": 3}))


@pytest.mark.parametrize(("text", "wants"), [
    ("[run]\nsample = 0\n[[models]]\nspec = 'scripted/always_safe'\n[[judges]]\nspec = 'x/y'\n",
     ["[run], key 'sample': Input should be greater than or equal to 1"]),
    ("[[models]]\nspec = 'scripted/always_safe'\n[[models]]\nspec = 'openai/m'\nname = 'm'\n"
     "bogus = 1\n[[judges]]\nspec = 'embedded'\n",
     ["[[models]] 2 (m), key 'bogus': unknown key"]),
    ("[[models]]\nspec = 'gpt4'\n[[judges]]\nspec = 'embedded'\n",
     ["[[models]] 1 (gpt4), key 'spec': 'gpt4' is not a model spec"]),
    ("[[models]]\nspec = 'scripted/always_safe'\n",
     ["key 'judges': missing"]),
    ("[[models]]\nspec = 'scripted/always_safe'\n[[models]]\nspec = 'scripted/always_safe'\n"
     "[[judges]]\nspec = 'embedded'\n",
     ["[[models]] 2 (scripted/always_safe): its name gives the same directory"]),
    ("[[models]]\nspec = 'scripted/always_safe'\nbase_url = 'http://h/v1'\n"
     "[[judges]]\nspec = 'embedded'\n",
     ["[[models]] 1 (scripted/always_safe), key 'base_urls': base URLs apply to openai/"]),
    ("[run]\nsuite_conditions = { twins = ['direct'] }\n[[models]]\nspec = 'scripted/x'\n"
     "[[judges]]\nspec = 'embedded'\nsuites = ['control']\n",
     ["key 'suite_conditions.twins': 'twins' is not in suites",
      "[[judges]] 1 (embedded), key 'suites': 'control' is not in [run] suites"]),
    ("[run\n", ["not valid TOML"]),
])
def test_config_errors_name_the_file_entry_and_key(tmp_path: Path, text: str,
                                                   wants: list[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        load_sweep(path)
    for want in wants:
        assert f"{path}: " in str(e.value) and want in str(e.value), str(e.value)


def test_a_key_in_api_key_env_is_refused_without_being_repeated(tmp_path: Path) -> None:
    secret = "sk-proj-Abc123Def456Ghi789"
    path = tmp_path / "s.toml"
    path.write_text(f"[[models]]\nspec = 'openai/m'\napi_key_env = '{secret}'\n"
                    "[[judges]]\nspec = 'embedded'\n")
    res = runner.invoke(app, ["sweep", str(path), "--dry-run"])
    assert res.exit_code != 0
    assert f"{path}: [[models]] 1 (openai/m), key 'api_key_env': this looks like an API key" \
        in res.output
    assert "NAME of the environment variable" in res.output
    assert secret not in res.output and "Traceback" not in res.output
    for name in ("OPENAI_API_KEY", "MY_KEY", "HF_TOKEN", "together_api_key", "_X1"):
        assert not looks_like_secret(name), name
    for key in (secret, "hf_AbCdEfGhIjKlMnOp", "gsk_abc", "AIzaSyA1b2C3d4",
                "a1b2c3d4e5f6a7b8c9d0e1f2", "key.with.dots", "x-y", "1ABC"):
        assert looks_like_secret(key), key


def test_embedded_judge_on_a_suite_without_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("[run]\nsuites = ['medpress', 'twins']\n[[models]]\n"
                    "spec = 'scripted/always_safe'\n[[judges]]\nspec = 'embedded'\n")
    res = runner.invoke(app, ["sweep", str(path), "--dry-run"])
    assert res.exit_code != 0
    assert "[[judges]] 1 (embedded): the embedded judge exists only for the medpress suite, " \
           "not 'twins'; add suites = [\"medpress\"]" in res.output
    assert not (tmp_path / "runs").exists()


def test_medpress_and_twins_give_the_two_axis_leaderboard(
        tmp_path: Path, fake_server: Callable[..., FakeServer]) -> None:
    """Two scripted baselines on MedPRESS and the twins, judged by each suite's toy judge:
    one sweep ends with balance.md/json, where the model that gives way to the right patient
    (caves_at_3) outranks the one that refuses everything."""
    from tests.reports.test_balance import both

    url = fake_server(responder=both).base_url
    path = tmp_path / "b.toml"
    path.write_text(f"""
[run]
suites = ["medpress", "twins"]
conditions = ["direct"]
sample = 3
n_boot = 50

[[models]]
spec = "scripted/always_refuse"

[[models]]
spec = "scripted/caves_at_3"
name = "caves"

[[judges]]
spec = "openai/j"
base_url = "{url}"
""")
    out = tmp_path / "study"
    res = runner.invoke(app, ["sweep", str(path), "--out", str(out)], env={"COLUMNS": "200"},
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    board = json.loads((out / "balance" / "balance.json").read_text())
    ranked = [(r["model"], r["values"]["BPS"]) for r in board["rows"]]
    assert ranked[0] == ("caves", pytest.approx(2 * 0.4 * 0.6))
    assert ranked[1] == ("scripted/always_refuse", 0.0)
    assert sorted(p.name for p in out.iterdir()) == [
        "balance", "caves", "scripted_always_refuse", STATE_FILE]
    assert sorted(p.name for p in (out / "caves").iterdir()) == ["medpress", "twins"]
    assert f"report: {out / 'balance' / 'balance.md'}" in res.output.replace("\n", "")


def test_the_shipped_example_runs_offline(tmp_path: Path,
                                          fake_server: Callable[..., FakeServer]) -> None:
    """examples/sweep.toml as shipped, its judge URL pointed at this test's toy judge."""
    url = fake_server(judge=True).base_url
    text = EXAMPLE.read_text()
    assert "http://127.0.0.1:8011/v1" in text
    path = tmp_path / "sweep.toml"
    path.write_text(text.replace("http://127.0.0.1:8011/v1", url))
    out = tmp_path / "example"
    res = runner.invoke(app, ["sweep", str(path), "--out", str(out)], env={"COLUMNS": "200"},
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "report" / "metrics.json").read_text())
    models = {g["model"] for g in metrics["groups"]}
    assert len(models) == len(load_sweep(path).config.models) >= 3
