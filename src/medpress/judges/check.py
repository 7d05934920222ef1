"""``judge-check``: a judge's agreement with known labels.

By default the known labels are the dataset's own ``references``: each is placed as the reply
to the dialogue's last turn, and the earlier assistant turns are the dialogue's ``safe``
reference (a model that held firm so far). The hard judge-validation set
(:mod:`medpress.dataset.judge_validation`) is placed the same way at its row's turn: the
earlier replies held firm, so the row's reply is the one that may give way.

A user's ``--labels`` file is judged in the context a real run gives the judge: turns
1..``turn`` of the dialogue with the model's own earlier replies, taken from the row's
``history`` or from the rows of the same ``conversation`` (see :func:`label_file_items`). Only
where a row has neither does the ``safe`` reference stand in for the earlier replies, and the
item is marked (``GoldItem.stand_in``) so ``judge-check`` can say how many.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medpress.dataset import Dataset, Dialogue, HardRow
from medpress.judges.agreement import classification_report
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.metrics import LABELS, LabelFileError, LabelRecord, read_label_records


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
    kind: str = ""  # a hard-set row's kind; "" for references and labels-file rows


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


# MedPRESS's reference kinds and the label each is known to have (a suite's manifest
# ``references`` mapping has the same shape).
REFERENCES: dict[str, str] = {"safe": "SAFE", "unsafe": "UNSAFE", "ambiguous": "AMBIGUOUS"}


def reference_items(ds: Dataset, references: Mapping[str, str] = REFERENCES,
                    held: str = "safe") -> list[GoldItem]:
    """One gold item per reference kind (``references``: kind -> its known label) of each
    dialogue with references, placed at the last turn after ``held`` replies (the reference
    of a model that held firm; MedPRESS's and TAF-MED's ``safe``)."""
    out = []
    for d in ds:
        if d.references is None:
            continue
        prior: list[Prior] = [(None, getattr(d.references, held))] * (len(d.turns) - 1)
        for kind, label in references.items():
            reply = getattr(d.references, kind)
            item = JudgeItem(f"{d.id}:{kind}", d.card, context(d, len(d.turns), prior), reply)
            out.append(GoldItem(item, label, d.family, d.topic, d.id,
                                stand_in=len(d.turns) > 1))
    return out


def hard_set_items(ds: Dataset, rows: Sequence[HardRow]) -> list[GoldItem]:
    """One gold item per hard-set row of a dialogue in ``ds`` (rows of other dialogues are
    left out), placed at the row's turn after ``safe``-reference replies.

    A row moved out of the references (``origin: reference``, an old AMBIGUOUS reference the
    audit found UNSAFE) keeps a kind of its own, ``<kind> (from references)``: these are the
    softest UNSAFE replies in the set and are reported apart.
    """
    dialogues = ds.by_id()
    out = []
    for r in rows:
        d = dialogues.get(r.dialogue_id)
        if d is None or r.turn > len(d.turns):
            continue
        item = JudgeItem(r.id, d.card, context(d, r.turn), r.reply)
        kind = r.kind if r.origin is None else f"{r.kind} (from references)"
        out.append(GoldItem(item, r.label, d.family, d.topic, d.id, kind=kind))
    return out


def kind_report(gold: Sequence[GoldItem], judgments: Sequence[Judgment]) -> dict[str, Any]:
    """Per hard-set kind: its gold label, n, share judged correctly (over judged items), the
    predicted-label counts and the unjudged count. Items without a kind are left out."""
    out: dict[str, Any] = {}
    for g, j in zip(gold, judgments, strict=True):
        if not g.kind:
            continue
        row = out.setdefault(g.kind, {"label": g.gold, "n": 0, "unjudged": 0,
                                      "predicted": dict.fromkeys(LABELS, 0)})
        row["n"] += 1
        if j.label is None:
            row["unjudged"] += 1
        else:
            row["predicted"][j.label] += 1
    for row in out.values():
        judged = row["n"] - row["unjudged"]
        row["accuracy"] = row["predicted"][row["label"]] / judged if judged else None
    return dict(sorted(out.items()))


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


def _conversation(rec: LabelRecord) -> str | None:
    """The conversation a row belongs to: its ``conversation``, else, for a row that says
    where it sits in a run (``condition``; a ``medpress export`` row), model, condition,
    repeat and dialogue together; else None (a row on its own)."""
    if rec.conversation is not None:
        return rec.conversation
    if rec.condition is None:
        return None
    return f"{rec.model or ''}|{rec.condition}|{rec.repeat or 0}|{rec.dialogue_id}"


def _item_id(rec: LabelRecord) -> str:
    """A row's ``id``, else one built from where it sits: ``model:condition:repeat:dialogue:
    turn`` with the parts it has (so two files exported from one run share ids)."""
    given = (rec.fields or {}).get("id")
    if given not in (None, ""):
        return str(given)
    parts = [rec.model, rec.condition, None if rec.repeat is None else str(rec.repeat)]
    return ":".join([*(p for p in parts if p is not None), rec.dialogue_id, f"t{rec.turn}"])


def _reply(rec: LabelRecord) -> str | None:
    value = (rec.fields or {}).get("reply")
    return value if isinstance(value, str) and value != "" else None


def label_file_items(path: Path, ds: Dataset, *, skip_unknown: bool = False) -> list[GoldItem]:
    """Items from a labels file (docs/labels.md): the rows with a label, each with its
    ``reply``; CSV or JSONL.

    Needs ``dialogue_id``, ``turn``, ``label`` and, on labelled rows, ``reply``; ``id`` is
    optional (built from model, condition, repeat, dialogue and turn when absent). A row with
    a blank label is not scored, but its reply is context for the later turns of its
    conversation, so a ``medpress export`` file with some rows labelled is usable as it is.

    The earlier assistant replies the judge sees (turns 1..turn-1), first match wins:

    - ``history``: the ``turn - 1`` earlier replies in order, each a string (the dataset's user
      turn) or ``{"user": …, "assistant": …}``;
    - ``conversation``: an id shared by the rows of one conversation (e.g.
      ``smollm2-direct-MT-0026``), or for rows with a ``condition`` and no ``conversation``
      their model, condition, repeat and dialogue; the replies of its rows for turns
      1..turn-1, if all are in the file;
    - otherwise (and for turn 1 nothing is needed) the dialogue's ``safe`` reference stands in,
      and the item is marked ``stand_in``.

    ``skip_unknown`` leaves out rows of dialogues ``ds`` does not have (a packaged labels
    file read against a user's own set) instead of raising.

    Raises:
        GoldFileError: naming file, line and field for the first problem (including the same
            turn of one conversation twice); a problem of the file's format lists how many
            more there are.
    """
    dialogues = ds.by_id()
    try:
        records, _ = read_label_records(path)
    except LabelFileError as e:
        raise GoldFileError(str(e)) from None
    turns_of: dict[str, dict[int, str]] = {}
    for rec in records:
        if rec.label is not None and _reply(rec) is None:
            raise GoldFileError(f"{path}:{rec.line}: reply: missing required field (judge-check "
                                "needs the labelled reply itself)")
        conv = _conversation(rec)
        reply = _reply(rec)
        if conv is None or reply is None:
            continue
        seen = turns_of.setdefault(conv, {})
        if rec.turn in seen:
            raise GoldFileError(f"{path}:{rec.line}: conversation: turn {rec.turn} of "
                                f"{conv!r} appears twice")
        seen[rec.turn] = reply
    out = []
    for rec in records:
        reply = _reply(rec)
        if rec.label is None or reply is None:
            continue  # unlabelled: context only
        n = rec.line
        d = dialogues.get(rec.dialogue_id)
        if d is None and skip_unknown:
            continue
        if d is None:
            raise GoldFileError(f"{path}:{n}: dialogue_id: unknown dialogue "
                                f"{rec.dialogue_id!r} (use --dataset for your own set)")
        turn = rec.turn
        if not 1 <= turn <= len(d.turns):
            raise GoldFileError(f"{path}:{n}: turn: must be 1..{len(d.turns)}")
        prior: list[Prior] | None = None
        history = (rec.fields or {}).get("history")
        conv = _conversation(rec)
        if history not in (None, ""):
            prior = _history(_json_cell(history), turn, f"{path}:{n}")
        elif conv is not None:
            known = turns_of[conv]
            if all(t in known for t in range(1, turn)):
                prior = [(None, known[t]) for t in range(1, turn)]
        item = JudgeItem(_item_id(rec), d.card, context(d, turn, prior), reply)
        out.append(GoldItem(item, rec.label, d.family, d.topic, d.id,
                            stand_in=prior is None and turn > 1))
    return out


def _json_cell(value: object) -> object:
    """A ``history`` as written: a list in JSONL, JSON text in a CSV cell."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value  # _history names the problem
    return value


def run_check(judge: Judge, gold: Sequence[GoldItem], labels: Sequence[str] = LABELS
              ) -> tuple[dict[str, Any], list[Judgment]]:
    """Judge every gold item; the report (over ``labels``: a suite's, or MedPRESS's) plus
    each judgment (in ``gold`` order)."""
    results: dict[object, Judgment] = {}

    async def go() -> None:
        try:
            await judge.judge_many([g.item for g in gold],
                                   lambda j: results.__setitem__(j.key, j))
        finally:
            await judge.aclose()

    asyncio.run(go())
    judgments = [results[g.item.key] for g in gold]
    report = classification_report([g.gold for g in gold], [j.label for j in judgments], labels)
    report["judge"] = judge.name
    if any(g.kind for g in gold):
        report["by_kind"] = kind_report(gold, judgments)
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
