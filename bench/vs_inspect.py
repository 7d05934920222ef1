"""MedPRESS side by side with UK AISI's inspect_ai on the same five-turn scripted workload.

inspect-ai is a benchmark dependency only: it lives in its own venv, ``bench/.venv-inspect``
(created here with ``python3 -m venv`` and ``pip install inspect-ai aiohttp openai`` if missing;
``openai`` is what inspect's ``openai-api`` provider needs), and its side runs in a subprocess
with that venv's python. Each dialogue is a system prompt (the ``direct`` condition) and five
user turns, each reply carried into the next turn's history.

(a) zero latency, each with its default logging: medpress ``scripted/caves_at_3`` (the run
    store, one commit per reply) vs inspect's ``mockllm/model`` answering the same replies
    (with a usage block, so tiktoken is never needed) and writing its default ``.eval`` log;
    the limit is a bare loop writing the same rows to SQLite (bench/harness_overhead.py).
(b) latency bound: both against the same 50 ms fake OpenAI-compatible server
    (bench/_common.start_fake_server) at concurrency 64, inspect through its ``openai-api``
    provider; the limit is a bare aiohttp loop with a semaphore of 64.

Targets: (a) medpress >= 100x inspect's turns/s and >= 0.5 of the bare loop; (b) medpress
>= 10x inspect's requests/s and >= 0.8 of the bare aiohttp loop. medpress and the bare loops
are timed best of three; inspect once (it is the slow side), timing only its ``eval()`` call.

Run: ``python bench/vs_inspect.py [--dialogues-a N] [--dialogues-b N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
VENV = BENCH / ".venv-inspect"
VENV_PY = VENV / "bin" / "python"
PACKAGES = ("inspect-ai", "aiohttp", "openai")
CONCURRENCY, LATENCY = 64, 0.05
BEHAVIOUR = "caves_at_3"


# -- the inspect side (runs under bench/.venv-inspect/bin/python; stdlib + inspect_ai only) --

def inspect_worker(spec_path: Path) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageSystem,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
        get_model,
    )
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.tool import ToolChoice, ToolInfo

    spec = json.loads(spec_path.read_text())
    dialogues: list[list[str]] = spec["dialogues"]

    @solver
    def five_turns() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            for i, text in enumerate(state.metadata["turns"]):
                if i > 0:
                    state.messages.append(ChatMessageUser(content=text))
                state = await generate(state)
            return state

        return solve

    samples = [Sample(id=i, input=[ChatMessageSystem(content=spec["system"]),
                                   ChatMessageUser(content=turns[0])],
                      metadata={"turns": turns}) for i, turns in enumerate(dialogues)]
    task = Task(dataset=samples, solver=five_turns())
    if spec["mode"] == "mock":
        replies = {(turns[0], t + 1): r for turns, rs in zip(dialogues, spec["replies"],
                                                             strict=True)
                   for t, r in enumerate(rs)}

        def scripted(messages: list[ChatMessage], tools: list[ToolInfo],
                     tool_choice: ToolChoice, config: GenerateConfig) -> ModelOutput:
            users = [m.text for m in messages if m.role == "user"]
            text = replies[(users[0], len(users))]
            out = ModelOutput.from_content(model="mockllm", content=text)
            out.usage = ModelUsage(input_tokens=0, output_tokens=len(text.split()),
                                   total_tokens=len(text.split()))
            return out

        model = get_model("mockllm/model", custom_outputs=scripted)
    else:
        model = get_model("openai-api/fake/m", base_url=spec["url"], api_key="x")
    with tempfile.TemporaryDirectory() as logs:
        t0 = time.perf_counter()
        log = eval(task, model=model, log_dir=logs, display="none",
                   max_connections=CONCURRENCY, max_samples=CONCURRENCY)[0]
        seconds = time.perf_counter() - t0
        log_bytes = sum(p.stat().st_size for p in Path(logs).rglob("*") if p.is_file())
        assert log.status == "success", log.error
        assert log.samples is not None and len(log.samples) == len(dialogues)
        turns = 0
        for s in log.samples:
            assistants = [m.text for m in s.messages if m.role == "assistant"]
            assert len(assistants) == len(s.metadata["turns"]), s.id
            if spec["mode"] == "mock":
                assert assistants == spec["replies"][int(s.id)], s.id
            turns += len(assistants)
    print(json.dumps({"turns": turns, "seconds": seconds, "log_bytes": log_bytes}))


# -- the driver (runs under the medpress venv) ------------------------------------------------

def ensure_inspect_venv() -> Path:
    """bench/.venv-inspect with inspect-ai, created if missing. Returns its python."""
    check = [str(VENV_PY), "-c", "import inspect_ai, openai, aiohttp"]
    if VENV_PY.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return VENV_PY
    print(f"installing {' '.join(PACKAGES)} into {VENV} ...", flush=True)
    subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV_PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=False)
    subprocess.run([str(VENV_PY), "-m", "pip", "install", "-q", *PACKAGES], check=True)
    subprocess.run(check, check=True)
    return VENV_PY


def run_inspect(spec: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INSPECT"))}
        proc = subprocess.run([str(VENV_PY), __file__, "--inspect-worker", f.name],
                              capture_output=True, text=True, timeout=timeout, env=env)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise RuntimeError(f"inspect side failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def best_of(n: int, fn: Any) -> float:
    """The best turns/s of ``n`` runs of ``fn`` (which returns the turns it did)."""
    best = 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        turns = fn()
        best = max(best, turns / (time.perf_counter() - t0))
    return best


def workload(n: int) -> tuple[Any, Any, dict[str, Any]]:
    """The plan medpress runs, and the same dialogues (and scripted replies) for inspect."""
    from _common import synthetic_set
    from medpress.backends import ChatRequest, GenerateConfig, ScriptedBackend
    from medpress.conditions import build_messages, load_conditions
    from medpress.runner import RunPlan

    (cond,) = load_conditions().get(["direct"])
    ds = synthetic_set(n)
    plan = RunPlan(ds, [cond], GenerateConfig())
    scripted = ScriptedBackend(BEHAVIOUR)
    dialogues, replies = [], []
    for d in ds:
        texts = [t.text for t in d.turns]
        rs: list[str] = []
        for t in range(1, len(texts) + 1):
            pairs = [(texts[i], rs[i] if i < t - 1 else None) for i in range(t)]
            rs.append(scripted.reply(ChatRequest(0, build_messages(cond.system, pairs))))
        dialogues.append(texts)
        replies.append(rs)
    return plan, cond, {"system": cond.system, "dialogues": dialogues, "replies": replies}


def zero_latency(n: int, tmp: Path) -> dict[str, float]:
    import asyncio

    from harness_overhead import bare_loop
    from medpress.backends import ScriptedBackend
    from medpress.runner import generate
    from medpress.store import RunStore

    plan, _, spec = workload(n)
    runs = iter(range(100))

    def medpress() -> int:
        store = RunStore(tmp / f"a-run{next(runs)}")
        s = asyncio.run(generate(ScriptedBackend(BEHAVIOUR), store, plan))
        assert s.turns_done == n * 5 and s.failed_turns == 0
        return s.turns_done

    ours = best_of(3, medpress)
    bare = best_of(3, lambda: bare_loop(tmp / f"a-bare{next(runs)}.sqlite", plan))
    insp = run_inspect({**spec, "mode": "mock"})
    assert insp["turns"] == n * 5
    return {"medpress": ours, "bare": bare, "inspect": insp["turns"] / insp["seconds"],
            "inspect_log_bytes": insp["log_bytes"]}


def latency_bound(n: int, tmp: Path) -> dict[str, float]:
    import asyncio

    import aiohttp

    from _common import start_fake_server
    from medpress.backends import OpenAIBackend
    from medpress.runner import generate
    from medpress.store import RunStore

    plan, cond, spec = workload(n)
    runs = iter(range(100))

    async def bare_aiohttp(url: str) -> int:
        sem = asyncio.Semaphore(CONCURRENCY)
        conn = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=conn) as session:
            async def one(turns: list[str]) -> int:
                msgs = [{"role": "system", "content": cond.system}]
                for text in turns:
                    msgs.append({"role": "user", "content": text})
                    async with sem, session.post(f"{url}/chat/completions", json={
                            "model": "m", "messages": msgs, "temperature": 0.0,
                            "max_tokens": 384, "seed": 0}) as r:
                        reply = (await r.json())["choices"][0]["message"]["content"]
                    msgs.append({"role": "assistant", "content": reply})
                return len(turns)

            return sum(await asyncio.gather(*(one(t) for t in spec["dialogues"])))

    def medpress(url: str) -> int:
        backend = OpenAIBackend("m", base_url=url, concurrency=CONCURRENCY)
        s = asyncio.run(generate(backend, RunStore(tmp / f"b-run{next(runs)}"), plan,
                                 concurrency=CONCURRENCY))
        assert s.turns_done == n * 5 and s.failed_turns == 0, s.as_dict()
        return s.turns_done

    proc, url = start_fake_server(LATENCY)
    try:
        asyncio.run(bare_aiohttp(url))  # warm-up
        aio = best_of(3, lambda: asyncio.run(bare_aiohttp(url)))
        ours = best_of(3, lambda: medpress(url))
        insp = run_inspect({**spec, "mode": "http", "url": url})
        assert insp["turns"] == n * 5
    finally:
        proc.terminate()
        proc.wait()
    return {"medpress": ours, "bare": aio, "inspect": insp["turns"] / insp["seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description="medpress vs inspect_ai, same workload")
    ap.add_argument("--inspect-worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--dialogues-a", type=int, default=600, help="zero-latency dialogues")
    ap.add_argument("--dialogues-b", type=int, default=200, help="latency-bound dialogues")
    ap.add_argument("--no-record", action="store_true", help="do not write bench/results.json")
    args = ap.parse_args()
    if args.inspect_worker:
        inspect_worker(args.inspect_worker)
        return
    sys.path.insert(0, str(BENCH))
    from _common import record

    ensure_inspect_venv()
    version = subprocess.run([str(VENV_PY), "-c", "import inspect_ai as i; print(i.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as t:
        a = zero_latency(args.dialogues_a, Path(t))
        b = latency_bound(args.dialogues_b, Path(t))
    ra_i, ra_b = a["medpress"] / a["inspect"], a["medpress"] / a["bare"]
    rb_i, rb_b = b["medpress"] / b["inspect"], b["medpress"] / b["bare"]
    print(f"inspect_ai {version}")
    print(f"(a) zero latency, {args.dialogues_a} dialogues x 5 turns, default logging:")
    print(f"    medpress {a['medpress']:>10,.0f} turns/s   inspect {a['inspect']:>8,.1f} turns/s"
          f"   bare SQLite loop {a['bare']:>10,.0f} turns/s")
    print(f"    medpress / inspect = {ra_i:,.0f}x (target >= 100x);  "
          f"medpress / bare = {ra_b:.2f} (target >= 0.5)")
    print(f"(b) 50 ms server, concurrency {CONCURRENCY}, {args.dialogues_b} dialogues x 5 turns:")
    print(f"    medpress {b['medpress']:>10,.0f} req/s     inspect {b['inspect']:>8,.1f} req/s"
          f"     bare aiohttp loop {b['bare']:>9,.0f} req/s")
    print(f"    medpress / inspect = {rb_i:,.1f}x (target >= 10x);  "
          f"medpress / aiohttp = {rb_b:.2f} (target >= 0.8)")
    print(json.dumps({"inspect_ai": version, "a": a, "b": b}))
    if args.no_record:
        return

    def info(v: float) -> dict[str, Any]:
        return {"value": v, "target": None, "met": None}

    record({
        "vs_inspect_a_medpress_turns_per_s": info(a["medpress"]),
        "vs_inspect_a_inspect_turns_per_s": {**info(a["inspect"]), "inspect_ai": version},
        "vs_inspect_a_bare_loop_turns_per_s": info(a["bare"]),
        "vs_inspect_a_ratio_vs_inspect": {"value": ra_i, "target": ">= 100",
                                          "met": ra_i >= 100},
        "vs_inspect_a_ratio_vs_bare_loop": {"value": ra_b, "target": ">= 0.5",
                                            "met": ra_b >= 0.5},
        "vs_inspect_b_medpress_rps": info(b["medpress"]),
        "vs_inspect_b_inspect_rps": {**info(b["inspect"]), "inspect_ai": version},
        "vs_inspect_b_bare_aiohttp_rps": info(b["bare"]),
        "vs_inspect_b_ratio_vs_inspect": {"value": rb_i, "target": ">= 10", "met": rb_i >= 10},
        "vs_inspect_b_ratio_vs_aiohttp": {"value": rb_b, "target": ">= 0.8",
                                          "met": rb_b >= 0.8},
    })


if __name__ == "__main__":
    main()
