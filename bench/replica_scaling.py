"""Throughput over 1, 2 and 4 replicas of one model (issue 23 item 4): ``--base-url`` repeated.

Each fake replica is its own process serving at most SLOTS requests at once, each taking
LATENCY s (a GPU server's batch slots), so one replica's capacity is SLOTS / LATENCY requests/s.
medpress runs N_DIALOGUES five-turn dialogues with ``--concurrency SLOTS`` (per replica).
Figure: requests/s with k replicas over k × requests/s with one, measured in the same run.
Target: >= 0.9 of linear. Run: ``python bench/replica_scaling.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from _common import record, start_fake_server, synthetic_set
from medpress.backends import GenerateConfig, OpenAIBackend
from medpress.conditions import load_conditions
from medpress.runner import RunPlan, generate
from medpress.store import RunStore

SLOTS, LATENCY, N_DIALOGUES = 8, 0.1, 64
REPLICAS = (1, 2, 4)


async def run(urls: list[str], run_dir: Path) -> float:
    """Requests per second of one medpress run over ``urls``."""
    backend = OpenAIBackend("fake", base_url=urls, concurrency=SLOTS)
    plan = RunPlan(synthetic_set(N_DIALOGUES), load_conditions().get(["direct"]),
                   GenerateConfig(max_tokens=16))
    t0 = time.perf_counter()
    try:
        summary = await generate(backend, RunStore(run_dir), plan, concurrency=SLOTS)
    finally:
        await backend.aclose()
    assert summary.failed_turns == 0, summary
    return (N_DIALOGUES * 5) / (time.perf_counter() - t0)


def main() -> None:
    procs, urls = zip(*(start_fake_server(LATENCY, SLOTS) for _ in range(max(REPLICAS))),
                      strict=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rates = {k: asyncio.run(run(list(urls[:k]), Path(tmp) / f"r{k}"))
                     for k in REPLICAS}
    finally:
        for p in procs:
            p.kill()
    capacity = SLOTS / LATENCY
    for k, rate in rates.items():
        print(f"{k} replica(s): {rate:7.1f} requests/s ({rate / (k * capacity):.2f} of their "
              f"capacity {k * capacity:.0f})")
    record({f"replica_scaling_{k}x_vs_linear": {
        "value": round(rates[k] / (k * rates[1]), 3), "target": 0.9,
        "met": rates[k] / (k * rates[1]) >= 0.9,
        "note": f"{rates[k]:.0f} vs {k} x {rates[1]:.0f} requests/s"} for k in REPLICAS[1:]})


if __name__ == "__main__":
    main()
