"""Several replicas of one model behind ``--base-url`` (issue 23 item 4)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import make_record, stored_rows, write_jsonl
from typer.testing import CliRunner

from medpress.backends import ChatRequest, OpenAIBackend, PreflightError, RetryPolicy, get_backend
from medpress.backends.openai_compat import ChatResult
from medpress.testing import FakeServer

FAST = RetryPolicy(max_retries=3, base_s=0.01, cap_s=0.05)


def many(b: OpenAIBackend, n: int) -> list[ChatResult]:
    return asyncio.run(_many_async(b, n))


def dead_url() -> str:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_requests_spread_over_replicas_within_each_limit(
    fake_server: Callable[..., FakeServer]
) -> None:
    servers = [fake_server(latency_s=0.05) for _ in range(3)]
    b = OpenAIBackend("m", base_url=[s.base_url for s in servers], concurrency=4, retry=FAST)
    results = many(b, 60)
    assert all(r.ok for r in results)
    served = [s.served for s in servers]
    assert sum(served) == 60 and min(served) >= 15  # least-in-flight: close to even
    # --concurrency is per replica: never more than 4 at once on any of them
    assert [s.max_in_flight for s in servers] == [4, 4, 4]
    assert b.identity()["base_urls"] == [s.base_url for s in servers]


def test_a_failing_replica_is_retried_elsewhere_at_once(
    fake_server: Callable[..., FakeServer]
) -> None:
    good = fake_server()
    # the first URL refuses every connection; backoff would take >= 10 s at these settings
    slow = RetryPolicy(max_retries=2, base_s=10.0, cap_s=10.0)
    b = OpenAIBackend("m", base_url=[dead_url(), good.base_url], concurrency=2, retry=slow)
    results = asyncio.run(asyncio.wait_for(_many_async(b, 12), timeout=5.0))
    assert all(r.ok for r in results) and good.served == 12
    stats = b.endpoint_stats()
    # the dead replica cools down after its first failures, so few requests try it
    assert stats[0]["served"] == 0 and 1 <= stats[0]["failures"]["connection"] <= 2
    assert sum(r.retries.get("connection", 0) for r in results) == \
        stats[0]["failures"]["connection"]


async def _many_async(b: OpenAIBackend, n: int) -> list[ChatResult]:
    try:
        return list(await asyncio.gather(*(
            b.complete(ChatRequest(str(i), [{"role": "user", "content": f"q{i}"}]))
            for i in range(n))))
    finally:
        await b.aclose()


def test_a_5xx_on_one_replica_goes_to_the_other(fake_server: Callable[..., FakeServer]) -> None:
    flaky, good = fake_server(faults=["503"]), fake_server()
    b = OpenAIBackend("m", base_url=[flaky.base_url, good.base_url], concurrency=1,
                      retry=RetryPolicy(max_retries=1, base_s=10.0, cap_s=10.0))
    [res] = asyncio.run(asyncio.wait_for(_many_async(b, 1), timeout=5.0))
    assert res.ok and res.retries == {"http_5xx": 1} and good.served == 1 and flaky.served == 0


def test_every_replica_failing_reports_the_last_url(fake_server: Callable[..., FakeServer]) -> None:
    a, c = fake_server(faults=["500"] * 5), fake_server(faults=["500"] * 5)
    b = OpenAIBackend("m", base_url=[a.base_url, c.base_url], concurrency=1, retry=FAST)
    [res] = many(b, 1)
    assert not res.ok and res.attempts == 4 and res.error_kind == "http_5xx"
    assert res.error is not None and "/v1: HTTP 500" in res.error


def test_preflight_names_the_replica_that_is_down(fake_server: Callable[..., FakeServer]) -> None:
    down = dead_url()
    b = get_backend("openai/m", base_url=[fake_server().base_url, down])
    with pytest.raises(PreflightError, match=down.replace(".", r"\.")):
        asyncio.run(b.preflight())
    # one URL keeps the old identity (a resumed run's provenance is unchanged)
    single = get_backend("openai/m", base_url=["http://127.0.0.1:9/v1/"])
    assert single.identity() == {"spec": "openai/m", "base_url": "http://127.0.0.1:9/v1"}


def test_cli_takes_repeated_base_url(fake_server: Callable[..., FakeServer],
                                     tmp_path: Path) -> None:
    from medpress.cli import app

    servers = [fake_server(latency_s=0.02), fake_server(latency_s=0.02)]
    data = write_jsonl(tmp_path / "d.jsonl", [make_record(i) for i in range(1, 5)])
    rd = tmp_path / "run"
    args = ["generate", "-m", "openai/m", "--dataset", str(data), "--conditions", "direct",
            "--run-dir", str(rd), "--concurrency", "1"]
    for s in servers:
        args += ["--base-url", s.base_url]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert len(stored_rows(rd)) == 20
    # four dialogues in flight, one request at a time per replica: both are used
    assert sum(s.served for s in servers) == 20 and min(s.served for s in servers) >= 5
    assert [s.max_in_flight for s in servers] == [1, 1]
