"""Judging a stored run: every generated reply a judge has not labelled yet."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from medpress.dataset import Dataset
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.judges.views import TurnKey
from medpress.store import RunStore, reply_issue


def run_items(store: RunStore, ds: Dataset, skip: set[TurnKey],
              not_judged: Callable[[TurnKey, str], None] | None = None, *,
              judge_truncated: bool = True) -> Iterator[JudgeItem]:
    """Every successfully generated reply not in ``skip``, with its dialogue so far (streamed).

    An empty reply is never judged, and a reply cut off at the token limit only when
    ``judge_truncated``: neither is an answer a judge should label as if it were one. Each such
    reply is passed to ``not_judged`` with the reason (``"empty"`` or ``"truncated"``).
    """
    cards = {d.id: d.card for d in ds}
    for _, rows in groupby(store.iter_turns(),
                           key=lambda r: (r["condition"], r["repeat"], r["dialogue_id"])):
        history: list[tuple[str, str | None]] = []
        for r in rows:
            if r["error"] is not None:
                break
            key: TurnKey = (r["condition"], r["repeat"], r["dialogue_id"], r["turn"])
            item_history = [*history, (r["user"], None)]
            issue = reply_issue(r["reply"], r.get("finish_reason"))
            if key in skip:
                pass
            elif issue == "empty" or (issue == "truncated" and not judge_truncated):
                if not_judged is not None:
                    not_judged(key, issue)
            else:
                yield JudgeItem(key, cards[r["dialogue_id"]], item_history, r["reply"] or "")
            history.append((r["user"], r["reply"]))


def judgment_row(judge: Judge, key: TurnKey, j: Judgment) -> dict[str, Any]:
    condition, repeat, dialogue_id, turn = key
    return {"condition": condition, "repeat": repeat, "dialogue_id": dialogue_id, "turn": turn,
            "judge": judge.name, "rubric_version": judge.rubric_version, "label": j.label,
            "failure_mode": j.failure_mode, "evidence": j.evidence, "rationale": j.rationale,
            "raw": j.raw, "error": j.error, "attempts": j.attempts,
            "prompt_tokens": j.prompt_tokens, "completion_tokens": j.completion_tokens,
            "latency_s": j.latency_s, "tags": j.tags}


@dataclass
class JudgeSummary:
    judge: str
    rubric_version: str = ""
    judged: int = 0
    unjudged: int = 0
    skipped: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    not_judged: Counter[str] = field(default_factory=Counter)
    """Replies left unjudged on purpose, by reason (``empty``, ``truncated``)."""


async def judge_run(store: RunStore, ds: Dataset, judge: Judge,
                    on_result: Callable[[Judgment], None] | None = None, *,
                    judge_truncated: bool = True) -> JudgeSummary:
    """Judge every reply this judge (and rubric version) has not labelled yet.

    Earlier failed verdicts of the same judge are dropped and retried; labels already stored,
    by this or any other judge, are never touched. It may run while the run is still being
    generated (it judges the replies stored so far; call it again to catch up); two judging
    processes on one run are refused (:meth:`RunStore.lock`). Empty replies (and truncated
    ones unless ``judge_truncated``) are stored as unjudged with the reason, and counted in
    the summary's ``not_judged``; they also count in ``unjudged``.
    """
    took = not store.holds("judge")
    if took:
        store.lock("judge", f"judge {judge.name}")
    try:
        return await _judge_run(store, ds, judge, on_result, judge_truncated)
    finally:
        if took:
            store.unlock("judge")


async def _judge_run(store: RunStore, ds: Dataset, judge: Judge,
                     on_result: Callable[[Judgment], None] | None,
                     judge_truncated: bool) -> JudgeSummary:
    store.delete_unjudged(judge.name, judge.rubric_version)
    done = store.judged_keys(judge.name, judge.rubric_version)
    summary = JudgeSummary(judge.name, judge.rubric_version, skipped=len(done))

    def record(j: Judgment) -> None:
        store.add_judgment(judgment_row(judge, j.key, j))  # type: ignore[arg-type]
        if j.label is None:
            summary.unjudged += 1
        else:
            summary.judged += 1
        summary.prompt_tokens += j.prompt_tokens or 0
        summary.completion_tokens += j.completion_tokens or 0
        if on_result is not None:
            on_result(j)

    def leave(key: TurnKey, issue: str) -> None:
        summary.not_judged[issue] += 1
        record(Judgment(key, None, error=f"not judged: {issue} reply", attempts=0))

    items = run_items(store, ds, done, leave, judge_truncated=judge_truncated)
    try:
        await judge.judge_many(items, record)
    finally:
        await judge.aclose()
    return summary
