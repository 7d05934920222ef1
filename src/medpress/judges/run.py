"""Judging a stored run, and reading its labels back for metrics (one judge or an ensemble)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from medpress.dataset import Dataset
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.judges.ensemble import disagrees, majority
from medpress.metrics import LabelRow
from medpress.store import RunStore

ENSEMBLE = "ensemble"
TurnKey = tuple[str, int, str, int]


def run_items(store: RunStore, ds: Dataset, skip: set[TurnKey]) -> Iterator[JudgeItem]:
    """Every successfully generated reply not in ``skip``, with its dialogue so far (streamed)."""
    cards = {d.id: d.card for d in ds}
    for _, rows in groupby(store.iter_turns(),
                           key=lambda r: (r["condition"], r["repeat"], r["dialogue_id"])):
        history: list[tuple[str, str | None]] = []
        for r in rows:
            if r["error"] is not None:
                break
            key: TurnKey = (r["condition"], r["repeat"], r["dialogue_id"], r["turn"])
            item_history = [*history, (r["user"], None)]
            if key not in skip:
                yield JudgeItem(key, cards[r["dialogue_id"]], item_history, r["reply"] or "")
            history.append((r["user"], r["reply"]))


def judgment_row(judge: Judge, key: TurnKey, j: Judgment) -> dict[str, Any]:
    condition, repeat, dialogue_id, turn = key
    return {"condition": condition, "repeat": repeat, "dialogue_id": dialogue_id, "turn": turn,
            "judge": judge.name, "rubric_version": judge.rubric_version, "label": j.label,
            "failure_mode": j.failure_mode, "evidence": j.evidence, "rationale": j.rationale,
            "raw": j.raw, "error": j.error, "attempts": j.attempts,
            "prompt_tokens": j.prompt_tokens, "completion_tokens": j.completion_tokens,
            "latency_s": j.latency_s}


@dataclass
class JudgeSummary:
    judge: str
    judged: int = 0
    unjudged: int = 0
    skipped: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


async def judge_run(store: RunStore, ds: Dataset, judge: Judge,
                    on_result: Callable[[Judgment], None] | None = None) -> JudgeSummary:
    """Judge every reply this judge (and rubric version) has not labelled yet.

    Earlier failed verdicts of the same judge are dropped and retried; labels already stored,
    by this or any other judge, are never touched.
    """
    store.delete_unjudged(judge.name, judge.rubric_version)
    done = store.judged_keys(judge.name, judge.rubric_version)
    summary = JudgeSummary(judge.name, skipped=len(done))

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

    try:
        await judge.judge_many(run_items(store, ds, done), record)
    finally:
        await judge.aclose()
    return summary


def _verdicts(store: RunStore) -> dict[TurnKey, dict[str, tuple[str | None, str | None]]]:
    """turn -> judge -> (label, failure_mode), over every judge in the store."""
    out: dict[TurnKey, dict[str, tuple[str | None, str | None]]] = defaultdict(dict)
    for j in store.iter_judgments():
        key = (j["condition"], j["repeat"], j["dialogue_id"], j["turn"])
        out[key][j["judge"]] = (j["label"], j["failure_mode"])
    return out


def resolve_judge(store: RunStore, judge: str | None) -> list[str]:
    """Which judges a label view uses: one named judge, or every judge for ``ensemble``/None.

    Raises:
        ValueError: if the named judge has no judgments in this run.
    """
    known = sorted({j for j, _ in store.judges()})
    if judge in (None, ENSEMBLE):
        return known
    if judge not in known:
        raise ValueError(f"no judgments by {judge!r} in {store.run_dir}; "
                         f"judges present: {', '.join(known) or 'none'}")
    return [judge]


def label_rows(store: RunStore, judge: str | None = None) -> tuple[list[LabelRow], str]:
    """Label rows for metrics and a description of where the labels came from.

    Every generated reply gets a row; a reply without a verdict is unjudged (label None).
    With several judges the label is their majority (see :mod:`medpress.judges.ensemble`).
    """
    judges = resolve_judge(store, judge)
    verdicts = _verdicts(store)
    model = (store.get_meta("model") or {}).get("spec", "?")
    rows: list[LabelRow] = []
    for t in store.iter_turns():
        if t["error"] is not None:
            continue
        key = (t["condition"], t["repeat"], t["dialogue_id"], t["turn"])
        votes = [verdicts.get(key, {}).get(j, (None, None)) for j in judges]
        label = majority([v[0] for v in votes])
        mode = next((m for lab, m in votes if lab == label and m), None) if label else None
        rows.append(LabelRow(model, t["condition"], t["dialogue_id"], t["family"], t["turn"],
                             label, mode, t["repeat"]))
    if not judges:
        desc = "none (no judgments in this run)"
    elif len(judges) == 1:
        desc = judges[0]
    else:
        desc = f"{ENSEMBLE} (majority of {', '.join(judges)}; ties go to the more severe label)"
    return rows, desc


def disagreements(store: RunStore) -> list[dict[str, Any]]:
    """Turns where the judges that voted disagree, with each judge's label, for human review."""
    judges = resolve_judge(store, ENSEMBLE)
    out = []
    for key, by_judge in sorted(_verdicts(store).items()):
        labels = [by_judge.get(j, (None, None))[0] for j in judges]
        if disagrees(labels):
            c, r, d, t = key
            out.append({"condition": c, "repeat": r, "dialogue_id": d, "turn": t,
                        "labels": dict(zip(judges, labels, strict=True)),
                        "ensemble": majority(labels)})
    return out


def pairwise_labels(store: RunStore) -> dict[str, list[str | None]]:
    """judge -> labels over every judged turn in the same order (None where that judge failed)."""
    judges = resolve_judge(store, ENSEMBLE)
    verdicts = _verdicts(store)
    keys = sorted(verdicts)
    return {j: [verdicts[k].get(j, (None, None))[0] for k in keys] for j in judges}
