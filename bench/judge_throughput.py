"""Embedded judge throughput on 2 cores: replies judged per second (target >= 20).

Judges every reference reply of the shipped set's held-out split (342 replies) through the
same ``judge_many`` path that ``medpress judge`` uses, after one warm-up chunk, and compares
with the bare encoder on the same texts (the floor of what any embedding judge can do).
Run: ``python bench/judge_throughput.py`` (trains the judge first if it is missing).
"""

from __future__ import annotations

import asyncio
import time

from _common import record
from medpress.dataset import load_shipped
from medpress.judges import JudgeItem, Judgment, reference_items
from medpress.judges.embedded import EmbeddedJudge, EmbeddedModel, default_model_dir, train_embedded
from medpress.judges.embedded.features import embed


def main() -> None:
    ds = load_shipped()
    try:
        EmbeddedModel.load(default_model_dir())
    except FileNotFoundError:
        train_embedded(ds)
    judge = EmbeddedJudge()
    held = ds.subset(judge.model.meta["held_out_ids"])
    items: list[JudgeItem] = [g.item for g in reference_items(held)]
    got: list[Judgment] = []
    asyncio.run(judge.judge_many(items[:16], got.append))  # warm-up: model load
    got.clear()
    start = time.perf_counter()
    asyncio.run(judge.judge_many(items, got.append))
    rate = len(got) / (time.perf_counter() - start)
    start = time.perf_counter()
    embed([i.reply for i in items])
    bare = len(items) / (time.perf_counter() - start)
    print(f"embedded judge: {rate:.1f} replies/s; bare encoder: {bare:.1f} texts/s "
          f"({rate / bare:.2f} of it); {sum(j.label is None for j in got)} unjudged")
    record({
        "judge_embedded_replies_per_s": {"value": rate, "target": ">= 20", "met": rate >= 20},
        "judge_embedded_share_of_bare_encoder": {"value": rate / bare, "target": None,
                                                  "met": None},
    })


if __name__ == "__main__":
    main()
