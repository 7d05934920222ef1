"""``judge-check``: a judge's agreement with known labels.

By default the known labels are the dataset's own ``references``: each is placed as the reply
to the dialogue's last turn, and the earlier assistant turns are the dialogue's ``safe``
reference (a model that held firm so far). A user's ``--labels`` file is judged the same way:
the judge sees turns 1..``turn`` of the dialogue, with the ``safe`` reference as every earlier
assistant reply.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medpress.dataset import Dataset, Dialogue
from medpress.judges.agreement import classification_report
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.metrics import LABELS


@dataclass(frozen=True)
class GoldItem:
    item: JudgeItem
    gold: str
    family: str = ""
    topic: str = ""
    dialogue_id: str = ""


class GoldFileError(ValueError):
    """A labels file problem, naming file, line and field."""


def context(d: Dialogue, turn: int) -> list[tuple[str, str | None]]:
    """Turns 1..turn, earlier assistant replies being the ``safe`` reference."""
    prior = d.references.safe if d.references else ""
    return [(t.text, prior if i < turn - 1 else None) for i, t in enumerate(d.turns[:turn])]


def reference_items(ds: Dataset) -> list[GoldItem]:
    """Three gold items per dialogue with references: safe, unsafe and ambiguous."""
    out = []
    for d in ds:
        if d.references is None:
            continue
        for kind in ("safe", "unsafe", "ambiguous"):
            reply = getattr(d.references, kind)
            item = JudgeItem(f"{d.id}:{kind}", d.card, context(d, len(d.turns)), reply)
            out.append(GoldItem(item, kind.upper(), d.family, d.topic, d.id))
    return out


def label_file_items(path: Path, ds: Dataset) -> list[GoldItem]:
    """Items from a JSONL of ``{"id", "dialogue_id", "turn", "reply", "label", "failure_mode"?}``.

    Raises:
        GoldFileError: naming file, line and field for the first problem.
    """
    dialogues = ds.by_id()
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec: dict[str, Any] = json.loads(line)
        except ValueError as e:
            raise GoldFileError(f"{path}:{n}: invalid JSON ({e})") from None
        for f in ("id", "dialogue_id", "turn", "reply", "label"):
            if f not in rec or rec[f] in (None, ""):
                raise GoldFileError(f"{path}:{n}: {f}: missing required field")
        d = dialogues.get(rec["dialogue_id"])
        if d is None:
            raise GoldFileError(f"{path}:{n}: dialogue_id: unknown dialogue "
                                f"{rec['dialogue_id']!r} (use --dataset for your own set)")
        if not isinstance(rec["turn"], int) or not 1 <= rec["turn"] <= len(d.turns):
            raise GoldFileError(f"{path}:{n}: turn: must be 1..{len(d.turns)}")
        if rec["label"] not in LABELS:
            raise GoldFileError(f"{path}:{n}: label: unknown label {rec['label']!r} "
                                f"(expected one of {', '.join(LABELS)})")
        item = JudgeItem(str(rec["id"]), d.card, context(d, rec["turn"]), str(rec["reply"]))
        out.append(GoldItem(item, rec["label"], d.family, d.topic, d.id))
    return out


def run_check(judge: Judge, gold: Sequence[GoldItem]) -> tuple[dict[str, Any], list[Judgment]]:
    """Judge every gold item; the report plus each judgment (in ``gold`` order)."""
    results: dict[object, Judgment] = {}

    async def go() -> None:
        try:
            await judge.judge_many([g.item for g in gold],
                                   lambda j: results.__setitem__(j.key, j))
        finally:
            await judge.aclose()

    asyncio.run(go())
    judgments = [results[g.item.key] for g in gold]
    report = classification_report([g.gold for g in gold], [j.label for j in judgments], LABELS)
    report["judge"] = judge.name
    return report, judgments


def label_agreement(first: Sequence[GoldItem], second: Sequence[GoldItem]) -> dict[str, Any]:
    """Agreement of two labellers on the ids they share, ``first`` taken as gold.

    The report of :func:`classification_report` plus ``only_in_first`` and ``only_in_second``
    (counts of ids the other file lacks, left out of every score).
    """
    a = {str(g.item.key): g.gold for g in first}
    b = {str(g.item.key): g.gold for g in second}
    shared = [k for k in a if k in b]
    report = classification_report([a[k] for k in shared], [b[k] for k in shared], LABELS)
    report["only_in_first"] = len(a.keys() - b.keys())
    report["only_in_second"] = len(b.keys() - a.keys())
    return report
