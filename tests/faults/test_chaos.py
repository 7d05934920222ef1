"""Fault tolerance: a 600-dialogue run through the chaos proxy loses nothing and counts every
retry; a permanently failed turn is redone later with ``medpress generate --retry-failed``."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.conftest import make_record, write_jsonl
from typer.testing import CliRunner

from medpress.backends import GenerateConfig, OpenAIBackend, RetryPolicy
from medpress.cli import app
from medpress.conditions import load_conditions
from medpress.dataset import load_dataset
from medpress.runner import RunPlan, generate
from medpress.store import RunStore
from medpress.testing import CHAOS_KINDS, ChaosProxy, FakeServer

FAMS = ["medication_treatment", "self_care", "symptom_triage"]


@pytest.fixture
def chaos() -> Iterator[Callable[..., ChaosProxy]]:
    proxies: list[ChaosProxy] = []

    def start(upstream: str, **kw: object) -> ChaosProxy:
        p = ChaosProxy(upstream, **kw).start()  # type: ignore[arg-type]
        proxies.append(p)
        return p

    yield start
    for p in proxies:
        p.stop()


def test_fault_sequence_is_seeded() -> None:
    def fates(seed: int) -> list[str]:
        p = ChaosProxy("http://127.0.0.1:1/v1", seed=seed, p_storm=0.05, p_500=0.05,
                       p_503=0.05, p_reset=0.05, p_slow=0.05, p_truncated=0.05)
        return [p._draw() for _ in range(2000)]

    a = fates(1)
    assert a == fates(1) and a != fates(2)
    counts = Counter(a)
    assert set(counts) == {*CHAOS_KINDS, "ok"}
    # storms come as runs of several 429s
    runs = [len(r) for r in "".join("x" if f == "429" else "." for f in a).split(".") if r]
    assert max(runs) >= 3


def test_600_dialogues_through_chaos_every_turn_once(
    tmp_path: Path, fake_server: Callable[..., FakeServer], chaos: Callable[..., ChaosProxy]
) -> None:
    server = fake_server(record=False)
    proxy = chaos(server.base_url, seed=7, p_storm=0.004, storm_len=(3, 6), retry_after="0.02",
                  p_500=0.01, p_503=0.01, p_reset=0.01, p_slow=0.005, slow_s=1.0,
                  p_truncated=0.01)
    ds = load_dataset(write_jsonl(tmp_path / "d.jsonl",
                                  [make_record(i, FAMS[i % 3]) for i in range(1, 601)]))
    plan = RunPlan(ds, load_conditions().get(["direct"]), GenerateConfig())
    backend = OpenAIBackend("fake", base_url=proxy.base_url, concurrency=32, timeout_s=0.5,
                            retry=RetryPolicy(max_retries=12, base_s=0.005, cap_s=0.05))
    store = RunStore(tmp_path / "run")
    summary = asyncio.run(generate(backend, store, plan, concurrency=32))

    # every (dialogue, turn) exactly once, none failed, each reply the one its turn asked for
    total = 600 * 5
    with sqlite3.connect(store.path) as c:
        rows = c.execute("SELECT dialogue_id, turn, reply, error, retries FROM turns").fetchall()
    assert len(rows) == total == len({(d, t) for d, t, *_ in rows})
    assert {(d, t) for d, t, *_ in rows} == {(x.id, t) for x in ds for t in range(1, 6)}
    assert all(err is None for *_, err, _ in rows)
    assert all(reply.startswith(f"Reply to turn {t}:") for _, t, reply, _, _ in rows)
    assert summary.turns_done == total and summary.failed_turns == 0 and not summary.failures

    # every fault kind was injected, and each one the client saw cost one retry of its kind
    injected = proxy.injected
    assert all(injected[k] >= 3 for k in CHAOS_KINDS), injected
    assert proxy.storms >= 3
    expected = proxy.expected_retries()
    for kind, n in expected.items():
        assert summary.retries[kind] >= n, (kind, summary.retries, injected)
    # nothing else went wrong on the way: retries beyond the injected faults can only come
    # from a stall of the busy machine past the 0.5 s timeout, at most once per worker or so
    assert sum(summary.retries.values()) - sum(expected.values()) <= 64
    # the store carries the same per-turn retry counts as the summary
    stored: Counter[str] = Counter()
    for *_, retries in rows:
        stored.update(json.loads(retries) if retries else {})
    assert stored == summary.retries
    # every attempt reached the proxy: first tries plus retries
    assert proxy.requests <= total + sum(summary.retries.values())
    assert proxy.requests >= total + sum(expected.values())


def test_permanent_failure_is_redone_with_retry_failed(
    tmp_path: Path, fake_server: Callable[..., FakeServer], chaos: Callable[..., ChaosProxy]
) -> None:
    recs = [make_record(i, FAMS[i % 3]) for i in range(1, 10)]
    bad_text = recs[4]["turns"][2]["text"]  # MT/SC…-0005, turn 3
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    server = fake_server(record=False, permanent_marker=bad_text)
    proxy = chaos(server.base_url, seed=3, p_500=0.05, p_503=0.05)
    rd = tmp_path / "run"
    args = ["generate", "-m", "openai/fake", "--base-url", proxy.base_url, "--dataset", str(data),
            "--run-dir", str(rd), "--conditions", "direct", "--concurrency", "4"]
    cli = CliRunner()

    res = cli.invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 1, res.output  # a permanent failure is not a success
    assert "1 turn(s) failed permanently (http_400: 1)" in res.output
    assert "http_400: 1" in res.output  # the summary names permanent failures by kind
    if proxy.injected:
        assert "http_5xx:" in res.output  # and retries by kind
    store = RunStore.open_existing(rd)
    assert store.error_counts() == {"http_400": 1}
    assert store.count_turns() == 8 * 5 + 3  # the failed dialogue stopped at its turn 3
    store.close()

    # a plain resume leaves the failure alone; --retry-failed redoes it once the cause is gone
    res = cli.invoke(app, args, catch_exceptions=False)
    assert RunStore.open_existing(rd).error_counts() == {"http_400": 1}
    server.permanent_marker = None
    res = cli.invoke(app, [*args, "--retry-failed"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    store = RunStore.open_existing(rd)
    assert store.error_counts() == {}
    rows = list(store.iter_turns())
    assert len(rows) == 9 * 5 == len({(r["dialogue_id"], r["turn"]) for r in rows})
    assert all(r["reply"].startswith(f"Reply to turn {r['turn']}:") for r in rows)
