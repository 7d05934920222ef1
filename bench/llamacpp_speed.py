"""Embedded generation speed: single-stream llama.cpp vs the medpress llamacpp backend.

Workload: the ``make run`` kind of job (SmolLM2, starter dialogues, five turns, temperature 0),
trimmed to ``--dialogues`` dialogues x the four conditions. Measured in one run:

1. single stream: one in-process context with every core, turn-major (each turn of every
   dialogue in sequence, as a per-turn batch would do), so nothing of a prompt is reused;
2. medpress with 2 worker processes of 1 thread each, every prompt evaluated afresh;
3. medpress with 1 worker, dialogue-major, each turn reusing the previous turn's KV prefix;
4. both: 2 workers with prefix reuse.

Prints completion tokens/s, the ratios to (1) (target >= 1.5 for the default) and whether every
reply is identical to (1). Run: ``python bench/llamacpp_speed.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from _common import record
from medpress.backends import GenerateConfig, LlamaCppBackend, smollm2_path
from medpress.backends.llamacpp import _config, _Engine
from medpress.conditions import DEFAULT_CONDITIONS, build_messages, load_conditions
from medpress.dataset import load_shipped, sample_ids, starter_ids
from medpress.runner import RunPlan, generate
from medpress.store import RunStore

CONFIG = GenerateConfig(max_tokens=96)
Replies = dict[tuple[str, str, int], str]


def single_stream(plan: RunPlan) -> tuple[float, Replies]:
    engine = _Engine(str(smollm2_path()), 4096, os.cpu_count() or 1)
    replies: Replies = {}
    tokens = 0
    start = time.perf_counter()
    for turn in range(1, 6):
        for unit in plan.units():
            pairs = [(unit.dialogue.turns[i].text,
                      replies[(unit.condition.name, unit.dialogue.id, i + 1)]
                      if i < turn - 1 else None) for i in range(turn)]
            out = engine.run(build_messages(unit.condition.system, pairs), _config(CONFIG))
            replies[(unit.condition.name, unit.dialogue.id, turn)] = out["text"].strip()
            tokens += out["completion_tokens"]
    return tokens / (time.perf_counter() - start), replies


def medpress_run(plan: RunPlan, workers: int, prefix: bool, tmp: Path) -> tuple[float, Replies]:
    backend = LlamaCppBackend(smollm2_path(), spec="smollm2", workers=workers,
                              prefix_cache=prefix)
    store = RunStore(tmp / f"w{workers}{prefix}")
    start = time.perf_counter()
    s = asyncio.run(generate(backend, store, plan, concurrency=workers))
    tps = s.completion_tokens / (time.perf_counter() - start)
    return tps, {(r["condition"], r["dialogue_id"], r["turn"]): r["reply"]
                 for r in store.iter_turns()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dialogues", type=int, default=3)
    args = ap.parse_args()
    ds = load_shipped()
    ds = ds.subset(sample_ids(ds.subset(starter_ids(ds)), args.dialogues, seed=0))
    plan = RunPlan(ds, load_conditions().get(DEFAULT_CONDITIONS), CONFIG)
    base, ref = single_stream(plan)
    print(f"single stream (1 context, {os.cpu_count()} threads, turn-major): {base:.1f} tok/s")
    figures = {"llamacpp_single_stream_tok_per_s": {"value": base, "target": None, "met": None}}
    with tempfile.TemporaryDirectory() as tmp:
        for workers, prefix in ((2, False), (1, True), (2, True)):
            tps, got = medpress_run(plan, workers, prefix, Path(tmp))
            same = sum(got[k] == v for k, v in ref.items())
            name = f"llamacpp_{workers}w{'_prefix' if prefix else ''}"
            print(f"medpress, {workers} worker(s), prefix cache {'on' if prefix else 'off'}: "
                  f"{tps:.1f} tok/s = {tps / base:.2f}x; identical replies {same}/{len(ref)}")
            figures[f"{name}_speedup"] = {"value": tps / base, "target": ">= 1.5",
                                          "met": tps / base >= 1.5}
            figures[f"{name}_identical_share"] = {"value": same / len(ref), "target": "1.0",
                                                  "met": same == len(ref)}
    record(figures)


if __name__ == "__main__":
    main()
