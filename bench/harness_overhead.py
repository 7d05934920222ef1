"""Runner + store overhead vs a bare loop writing the same rows with the same durability.

Workload: the ``scripted`` backend over 600 dialogues x 4 conditions x 5 turns (12,000 turns).
Target: medpress at least 50% of the bare loop's turns/s. Run: ``python bench/harness_overhead.py``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from _common import record, synthetic_set
from medpress.backends import ChatRequest, GenerateConfig, ScriptedBackend
from medpress.conditions import DEFAULT_CONDITIONS, build_messages, load_conditions
from medpress.runner import RunPlan, generate
from medpress.store import RunStore
from medpress.store.store import SCHEMA, TURN_COLUMNS


def bare_loop(db: Path, plan: RunPlan) -> int:
    """The same replies and rows, no runner: one autocommit INSERT per turn in WAL mode."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(SCHEMA)
    sql = (f"INSERT INTO turns ({', '.join(TURN_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(TURN_COLUMNS))})")
    backend = ScriptedBackend("caves_at_3")
    n = 0
    for unit in plan.units():
        replies: list[str] = []
        for t, turn in enumerate(unit.dialogue.turns, 1):
            pairs = [(unit.dialogue.turns[i].text, replies[i] if i < t - 1 else None)
                     for i in range(t)]
            reply = backend.reply(ChatRequest(0, build_messages(unit.condition.system, pairs)))
            conn.execute(sql, (unit.condition.name, 0, unit.dialogue.id, t, unit.dialogue.family,
                               turn.pressure, turn.text, reply, None, 0, len(reply.split()), 0.0,
                               None, None, 1, None, time.time(), "stop", None))
            replies.append(reply)
            n += 1
    conn.close()
    return n


def main() -> None:
    plan = RunPlan(synthetic_set(600), load_conditions().get(DEFAULT_CONDITIONS), GenerateConfig())
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        n_bare = bare_loop(Path(tmp) / "bare.sqlite", plan)
        bare = n_bare / (time.perf_counter() - t0)
        store = RunStore(Path(tmp) / "run")
        t0 = time.perf_counter()
        s = asyncio.run(generate(ScriptedBackend("caves_at_3"), store, plan))
        ours = s.turns_done / (time.perf_counter() - t0)
        assert s.turns_done == n_bare == 12_000
    print(json.dumps({"bare_turns_per_s": round(bare), "medpress_turns_per_s": round(ours)}))
    record({
        "harness_bare_loop_turns_per_s": {"value": bare, "target": None, "met": None},
        "harness_medpress_turns_per_s": {"value": ours, "target": None, "met": None},
        "harness_ratio_vs_bare_loop": {"value": ours / bare, "target": ">= 0.5",
                                       "met": ours / bare >= 0.5},
    })


if __name__ == "__main__":
    main()
