"""``judge-check``: a judge's agreement with known labels.

By default the known labels are the dataset's own ``references``: each is placed as the reply
to the dialogue's last turn, and the earlier assistant turns are the dialogue's ``safe``
reference (a model that held firm so far).

A user's ``--labels`` file is judged in the context a real run gives the judge: turns
1..``turn`` of the dialogue with the model's own earlier replies, taken from the row's
``history`` or from the rows of the same ``conversation`` (see :func:`label_file_items`). Only
where a row has neither does the ``safe`` reference stand in for the earlier replies, and the
item is marked (``GoldItem.stand_in``) so ``judge-check`` can say how many.
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
    """A labelled reply in context. ``stand_in``: the ``safe`` reference stands in for at
    least one earlier assistant reply (the labels file did not carry the real ones)."""

    item: JudgeItem
    gold: str
    family: str = ""
    topic: str = ""
    dialogue_id: str = ""
    stand_in: bool = False


class GoldFileError(ValueError):
    """A labels file problem, naming file, line and field."""


Prior = tuple[str | None, str]  # (user text or None for the dataset's, assistant reply)


def context(d: Dialogue, turn: int, prior: Sequence[Prior] | None = None
            ) -> list[tuple[str, str | None]]:
    """Turns 1..turn as (user, reply), the last reply None.

    ``prior`` holds the ``turn - 1`` earlier exchanges (a None user text means the dataset's
    turn); without it every earlier reply is the ``safe`` reference ("" if there is none).
    """
    if prior is None:
        ref = d.references.safe if d.references else ""
        prior = [(None, ref)] * (turn - 1)
    earlier = [(user or t.text, reply) for t, (user, reply) in zip(d.turns, prior, strict=False)]
    return [*earlier, (d.turns[turn - 1].text, None)]


def reference_items(ds: Dataset) -> list[GoldItem]:
    """Three gold items per dialogue with references: safe, unsafe and ambiguous."""
    out = []
    for d in ds:
        if d.references is None:
            continue
        for kind in ("safe", "unsafe", "ambiguous"):
            reply = getattr(d.references, kind)
            item = JudgeItem(f"{d.id}:{kind}", d.card, context(d, len(d.turns)), reply)
            out.append(GoldItem(item, kind.upper(), d.family, d.topic, d.id,
                                stand_in=len(d.turns) > 1))
    return out


def _history(value: object, turn: int, where: str) -> list[Prior]:
    """A row's ``history``: ``turn - 1`` earlier replies, each a string or an object
    ``{"assistant": str, "user"?: str}`` (``user`` replaces the dataset's turn text).

    Raises:
        GoldFileError: for any other shape or length.
    """
    if not isinstance(value, list) or len(value) != turn - 1:
        raise GoldFileError(f"{where}: history: must be a list of the {turn - 1} earlier "
                            "replies (strings or {\"user\", \"assistant\"} objects)")
    out: list[Prior] = []
    for i, h in enumerate(value, 1):
        if isinstance(h, str):
            out.append((None, h))
        elif (isinstance(h, dict) and isinstance(h.get("assistant"), str)
              and isinstance(h.get("user", ""), str)):
            out.append((h.get("user") or None, h["assistant"]))
        else:
            raise GoldFileError(f"{where}: history: entry {i} must be a string or an object "
                                "with a string 'assistant'")
    return out


def _rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line.

    Raises:
        GoldFileError: for a line that is not a JSON object.
    """
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise GoldFileError(f"{path}:{n}: invalid JSON ({e})") from None
        if not isinstance(rec, dict):
            raise GoldFileError(f"{path}:{n}: not a JSON object")
        out.append((n, rec))
    return out


def label_file_items(path: Path, ds: Dataset, *, skip_unknown: bool = False) -> list[GoldItem]:
    """Items from a JSONL of ``{"id", "dialogue_id", "turn", "reply", "label"}`` rows, with
    optional ``failure_mode``, ``history`` and ``conversation``.

    The earlier assistant replies the judge sees (turns 1..turn-1), first match wins:

    - ``history``: the ``turn - 1`` earlier replies in order, each a string (the dataset's user
      turn) or ``{"user": …, "assistant": …}``;
    - ``conversation``: an id shared by the rows of one conversation (e.g.
      ``smollm2-direct-MT-0026``); the replies of its rows for turns 1..turn-1, if all are in
      the file;
    - otherwise (and for turn 1 nothing is needed) the dialogue's ``safe`` reference stands in,
      and the item is marked ``stand_in``.

    ``skip_unknown`` leaves out rows of dialogues ``ds`` does not have (a packaged labels
    file read against a user's own set) instead of raising.

    Raises:
        GoldFileError: naming file, line and field for the first problem (including the same
            turn of one conversation twice).
    """
    dialogues = ds.by_id()
    rows = _rows(path)
    turns_of: dict[str, dict[int, str]] = {}
    for n, rec in rows:
        for f in ("id", "dialogue_id", "turn", "reply", "label"):
            if f not in rec or rec[f] in (None, ""):
                raise GoldFileError(f"{path}:{n}: {f}: missing required field")
        conv = rec.get("conversation")
        if conv is not None:
            seen = turns_of.setdefault(str(conv), {})
            if rec["turn"] in seen:
                raise GoldFileError(f"{path}:{n}: conversation: turn {rec['turn']} of "
                                    f"{conv!r} appears twice")
            seen[rec["turn"]] = str(rec["reply"])
    out = []
    for n, rec in rows:
        d = dialogues.get(rec["dialogue_id"])
        if d is None and skip_unknown:
            continue
        if d is None:
            raise GoldFileError(f"{path}:{n}: dialogue_id: unknown dialogue "
                                f"{rec['dialogue_id']!r} (use --dataset for your own set)")
        turn = rec["turn"]
        if not isinstance(turn, int) or not 1 <= turn <= len(d.turns):
            raise GoldFileError(f"{path}:{n}: turn: must be 1..{len(d.turns)}")
        if rec["label"] not in LABELS:
            raise GoldFileError(f"{path}:{n}: label: unknown label {rec['label']!r} "
                                f"(expected one of {', '.join(LABELS)})")
        prior: list[Prior] | None = None
        if rec.get("history") is not None:
            prior = _history(rec["history"], turn, f"{path}:{n}")
        elif rec.get("conversation") is not None:
            known = turns_of[str(rec["conversation"])]
            if all(t in known for t in range(1, turn)):
                prior = [(None, known[t]) for t in range(1, turn)]
        item = JudgeItem(str(rec["id"]), d.card, context(d, turn, prior), str(rec["reply"]))
        out.append(GoldItem(item, rec["label"], d.family, d.topic, d.id,
                            stand_in=prior is None and turn > 1))
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
