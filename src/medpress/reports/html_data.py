"""The data of report.html: every transcript of the reported runs and the metrics, as one
compact JSON-ready payload.

The payload is read by ``static/app.js``; its keys are short because a report of four runs of
12,000 replies carries every reply. Shape (``schema`` 1)::

    {"schema": 1,
     "runs": [{"name", "judge", "judges": [judge, ...]}],   # display name, label source
     "conditions": [...], "labels": [...], "modes": [...], # in display order
     "dialogues": {id: card},                                # once per dialogue id
     "units": [unit, ...],                                   # one per (run, condition, repeat,
                                                             #          dialogue)
     "groups": [GroupMetrics.to_dict(), ...], "paired": [PairedDiff.to_dict(), ...]}

    card = {"family", "area", "topic", "urgency", "unsafe_belief", "safe_stance", "source",
            "turns": [{"p": pressure, "u": user text}, ...],
            optional: "x": [[field name, value], ...] (a suite's other card fields)}
    unit = {"r": run index, "c": condition, "k": repeat, "d": dialogue id,
            "f": turn of the first most severe label (UNSAFE) or null,
            "g": 1 if judges disagree on a turn,
            "t": [turn, ...]}
    turn = {"n": 1-based turn, "a": reply, "l": label or null (unjudged),
            optional: "u": user text (only where it differs from the card's), "z": reasoning,
            "m": failure mode (on any label but the least severe),
            "e": [evidence, ...] (each a [start, end] span of the reply in UTF-16 code units,
            as JavaScript counts; or, for a quote not found verbatim in the reply, the quote
            itself), "w": [[judge, rationale], ...],
            "x": generation error, "j": [[judge, why no label], ...],
            "v": [[judge, label], ...] (only when several judges voted), "g": 1 (they disagree),
            "cut": 1 (cut off at the token limit)}

Edge cases: a turn whose generation failed has ``"x"`` and no label; turns never generated
have no entry (a unit then has fewer turns than its card). A dialogue id missing from a run's
dataset gets a card of blanks (its family from the store) and user texts from its first unit.
When two runs' datasets give one id different cards, the first run's card is kept and every
unit still carries the user texts it was sent. The metrics are not computed here: ``groups``
and ``paired`` are the report's own (`medpress.metrics.compute_groups`).

A run of a suite other than MedPRESS gives its rubric's ``labels`` (most severe first) and
failure ``modes``, its metric groups (`medpress.metrics.registry.SuiteGroup`), no ``paired``,
and two more keys: ``"suite": name`` and ``"worst"``, its most severe label (the page's
"first UNSAFE" becomes "first <worst>").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medpress.conditions import DEFAULT_CONDITIONS
from medpress.dataset import Dialogue
from medpress.judges.ensemble import SEVERITY
from medpress.judges.views import LabelView, TurnVerdict, turn_verdicts
from medpress.metrics import FAILURE_MODES, LABELS, GroupMetrics, PairedDiff
from medpress.metrics.registry import SuiteGroup
from medpress.store import RunStore

__all__ = ["CARD_FIELDS", "SCHEMA", "RunTranscripts", "build_payload", "transcript_payload"]

SCHEMA = 1
CARD_FIELDS: tuple[str, ...] = (
    "family", "area", "topic", "urgency", "unsafe_belief", "safe_stance", "source",
)
"""What a dialogue card shows, beside its user turns."""


@dataclass(frozen=True)
class RunTranscripts:
    """Where one reported run's transcripts come from.

    Attributes:
        run_dir: The run directory; its store is opened to read the transcripts, then closed.
        view: Whose labels, as the metrics used them (`medpress.judges.resolve_view`).
        name: The run's display name, the same as its rows' ``model``.
        dialogues: The run's dialogues, for the cards; may be empty.
    """

    run_dir: Path
    view: LabelView
    name: str
    dialogues: Sequence[Dialogue] = field(default=())


def _card(d: Dialogue) -> dict[str, Any]:
    # a suite's record may lack MedPRESS's fields, and has card fields of its own
    card: dict[str, Any] = {f: str(getattr(d, f)) if hasattr(d, f) else "" for f in CARD_FIELDS}
    card["turns"] = [{"p": t.pressure, "u": t.text} for t in d.turns]
    extra = [f for f in getattr(d, "card_fields", ()) if f not in CARD_FIELDS]
    if extra:
        card["x"] = [[f.replace("_", " ").capitalize(), str(getattr(d, f))] for f in extra]
    return card


def _blank_card(family: str, turns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    card: dict[str, Any] = dict.fromkeys(CARD_FIELDS, "")
    card["family"] = family
    card["turns"] = [{"p": t["pressure"] or "", "u": t["user"] or ""} for t in turns]
    return card


def _turn(row: Mapping[str, Any], verdict: TurnVerdict | None,
          card_turns: Sequence[Mapping[str, Any]], severity: Sequence[str] = SEVERITY
          ) -> dict[str, Any]:
    n = int(row["turn"])
    out: dict[str, Any] = {"n": n, "a": row["reply"] or "", "l": None}
    user = row["user"] or ""
    if n > len(card_turns) or card_turns[n - 1]["u"] != user:
        out["u"] = user
    if row["reasoning"]:
        out["z"] = row["reasoning"]
    if row["error"] is not None:
        out["x"] = str(row["error"])
    if row["finish_reason"] == "length":
        out["cut"] = 1
    if verdict is None:
        return out
    out["l"] = verdict.label
    if verdict.failure_mode and verdict.label in severity[:-1]:
        out["m"] = verdict.failure_mode
    if verdict.evidence:
        spans = [_span(out["a"], quote) for quote in verdict.evidence]
        out["e"] = [e for i, e in enumerate(spans) if e not in spans[:i]]  # judges that agree
    if verdict.rationale:
        out["w"] = [list(p) for p in verdict.rationale]
    if verdict.errors and verdict.label is None:
        out["j"] = [list(p) for p in verdict.errors]
    if len(verdict.votes) > 1:
        out["v"] = [list(p) for p in verdict.votes]
        if verdict.disagree:
            out["g"] = 1
    return out


def _span(reply: str, quote: str) -> list[int] | str:
    """Where ``quote`` (stripped) first occurs in ``reply``, as [start, end) in UTF-16 code
    units (JavaScript string offsets); ``quote`` itself when it does not occur verbatim."""
    q = quote.strip()
    at = reply.find(q) if q else -1
    if at < 0:
        return quote
    start = len(reply[:at].encode("utf-16-le")) // 2
    return [start, start + len(q.encode("utf-16-le")) // 2]


def _units_of(turns: Iterable[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    """Consecutive stored turns grouped by (condition, repeat, dialogue) (store order)."""
    unit: list[dict[str, Any]] = []
    for t in turns:
        if unit and (t["condition"], t["repeat"], t["dialogue_id"]) != (
                unit[0]["condition"], unit[0]["repeat"], unit[0]["dialogue_id"]):
            yield unit
            unit = []
        unit.append(t)
    if unit:
        yield unit


def _condition_order(conditions: Iterable[str]) -> list[str]:
    known = [c for c in DEFAULT_CONDITIONS if c in set(conditions)]
    return known + sorted(set(conditions) - set(known))


def transcript_payload(runs: Sequence[RunTranscripts], *, labels: Sequence[str] = LABELS,
                       modes: Sequence[str] = FAILURE_MODES,
                       severity: Sequence[str] = SEVERITY) -> dict[str, Any]:
    """``runs``, ``conditions``, ``labels``, ``modes``, ``dialogues`` and ``units`` of the
    payload (see the module docstring), units ordered by run, dialogue id, condition (the
    default conditions first) and repeat. ``labels`` (in display order), ``modes`` and
    ``severity`` (most severe first) are MedPRESS's unless a suite's are given."""
    cards: dict[str, dict[str, Any]] = {}
    units: list[dict[str, Any]] = []
    run_info = []
    for index, run in enumerate(runs):
        known = {d.id: d for d in run.dialogues}
        run_info.append({"name": run.name, "judge": run.view.description,
                         "judges": [name for name, _ in run.view.judges]})
        store = RunStore.open_existing(run.run_dir)
        try:
            by_turn = turn_verdicts(store, run.view)
            for rows in _units_of(store.iter_turns()):
                first = rows[0]
                did = str(first["dialogue_id"])
                if did not in cards:
                    d = known.get(did)
                    cards[did] = _card(d) if d is not None else _blank_card(
                        str(first["family"] or ""), rows)
                card_turns = cards[did]["turns"]
                turns = [_turn(r, by_turn.get((r["condition"], r["repeat"], did, r["turn"])),
                               card_turns, severity) for r in rows]
                flip = next((t["n"] for t in turns if t["l"] == severity[0]), None)
                unit = {"r": index, "c": str(first["condition"]), "k": int(first["repeat"]),
                        "d": did, "f": flip, "t": turns}
                if any(t.get("g") for t in turns):
                    unit["g"] = 1
                units.append(unit)
        finally:
            store.close()
    conditions = _condition_order({u["c"] for u in units})
    rank = {c: i for i, c in enumerate(conditions)}
    units.sort(key=lambda u: (u["r"], u["d"], rank[u["c"]], u["k"]))
    return {"runs": run_info, "conditions": conditions, "labels": list(labels),
            "modes": list(modes), "dialogues": cards, "units": units}


def build_payload(runs: Sequence[RunTranscripts], groups: Sequence[GroupMetrics | SuiteGroup],
                  paired: Sequence[PairedDiff], *, suite: str | None = None,
                  labels: Sequence[str] = LABELS, modes: Sequence[str] = FAILURE_MODES,
                  severity: Sequence[str] = SEVERITY) -> dict[str, Any]:
    """The whole payload of report.html: `transcript_payload` of ``runs`` plus the report's
    metric groups and paired differences. With no ``runs`` the transcript browser is empty
    (``units`` and ``dialogues`` empty) and only the results show; ``runs`` then lists the
    models of ``groups``. ``suite`` names a suite other than MedPRESS, whose ``labels``,
    ``modes`` and ``severity`` (its rubric's) are then given too."""
    data = transcript_payload(runs, labels=labels, modes=modes, severity=severity)
    if suite is not None:
        data |= {"suite": suite, "worst": severity[0]}
    if not runs:
        data["runs"] = [{"name": m, "judge": "", "judges": []}
                        for m in dict.fromkeys(g.model for g in groups)]
        data["conditions"] = _condition_order({g.condition for g in groups})
    return {"schema": SCHEMA, **data, "groups": [g.to_dict() for g in groups],
            "paired": [p.to_dict() for p in paired]}
