"""Label views: which stored judgments a table is built from, read back as metric rows.

A judge is identified by its name *and* rubric version: re-training the embedded judge or
editing the rubric gives a new version, and two versions are never mixed in one view.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medpress.judges.ensemble import SEVERITY, disagrees, majority
from medpress.metrics import LabelRow
from medpress.store import RunStore

ENSEMBLE = "ensemble"
IMPORT_VERSION = "import"
"""The rubric version of labels attached with ``labels import`` (people, other tools)."""

TurnKey = tuple[str, int, str, int]  # (condition, repeat, dialogue_id, turn)
JudgeKey = tuple[str, str]  # (judge name, rubric version)
Verdicts = dict[TurnKey, dict[JudgeKey, dict[str, Any]]]
DETAIL_FIELDS: tuple[str, ...] = ("evidence", "rationale", "error")
"""What `turn_labels` gives beside the label: the judge's quote, its reasoning, its failure."""


@dataclass(frozen=True)
class LabelView:
    """The judges (name and rubric version) whose labels a view uses, and how it says so.

    ``severity`` orders the labels most severe first: an ensemble's tie goes to the first.
    """

    judges: tuple[JudgeKey, ...]
    description: str
    severity: tuple[str, ...] = SEVERITY


def run_severity(store: RunStore) -> tuple[str, ...]:
    """The tie order of the run's suite: its rubric's labels, most severe first. MedPRESS runs
    keep :data:`SEVERITY` (its rubric lists SAFE first, so its order is not the rubric's)."""
    meta = store.get_meta("suite")
    if not meta:
        return SEVERITY
    from medpress.judges.rubric import load_rubric
    from medpress.suites import stored_suite

    suite = stored_suite(meta)
    return SEVERITY if suite.is_default else tuple(load_rubric(suite.rubric_path).labels)


def _versions(store: RunStore) -> dict[str, list[str]]:
    """judge -> its rubric versions, oldest first (by when their judgments were stored)."""
    out: dict[str, list[str]] = defaultdict(list)
    for name, version in store.judges():
        out[name].append(version)
    return dict(out)


def _describe(key: JudgeKey, versions: Sequence[str]) -> str:
    name, version = key
    if version == IMPORT_VERSION:
        return f"{name} (imported labels)"
    text = f"{name} [rubric {version}]"
    older = [v for v in versions if v != version]
    if older:
        text += (f" (newest of {len(versions)} rubric versions; {', '.join(older)} not used: "
                 f"pick one with --judge {name}@VERSION)")
    return text


def _pick(name: str, versions: dict[str, list[str]], store: RunStore) -> JudgeKey:
    """``name`` (its newest version) or ``name@version``."""
    base, _, version = name.partition("@")
    if base not in versions:
        raise ValueError(f"no judgments by {base!r} in {store.run_dir}; judges present: "
                         f"{', '.join(sorted(versions)) or 'none'}")
    if not version:
        return base, versions[base][-1]
    if version not in versions[base]:
        raise ValueError(f"no judgments by {base!r} with rubric version {version!r} in "
                         f"{store.run_dir}; versions present: {', '.join(versions[base])}")
    return base, version


def resolve_view(store: RunStore, spec: str | None) -> LabelView:
    """Which labels a table, report or export uses.

    ``spec`` (the ``--judge`` option), in order of precedence:

    * ``None``: the run's only judge. A run with several (other judges, imported labels) is
      an error that lists them, since any silent choice would be a guess. No judge at all
      gives an empty view (every reply unjudged).
    * ``"ensemble"``: the majority of every judge except imported labels.
    * ``"a,b,..."``: the majority of the named judges.
    * ``"name"``: that judge; ``"name@version"``: that judge's labels under one rubric version.

    A judge named without a version always means its newest rubric version; older versions
    are never mixed in, and the description says they exist.

    Raises:
        ValueError: a named judge or version that is not in the run, or ``None`` with several
            judges present.
    """
    versions = _versions(store)
    if spec is None:
        if not versions:
            return LabelView((), "none (no judgments in this run)", run_severity(store))
        if len(versions) > 1:
            listed = ", ".join(_describe((n, v[-1]), [v[-1]]) for n, v in sorted(versions.items()))
            raise ValueError(
                f"{store.run_dir} has labels from several judges: {listed}. Pick one with "
                f"--judge NAME, or combine them with --judge {ENSEMBLE} (every judge except "
                "imported labels) or --judge NAME,NAME")
        spec = next(iter(versions))
    if spec == ENSEMBLE:
        keys = [(n, v[-1]) for n, v in sorted(versions.items()) if v[-1] != IMPORT_VERSION]
        if not keys:
            raise ValueError(f"no judges to combine in {store.run_dir}")
    else:
        names = [s.strip() for s in spec.split(",") if s.strip()]
        if not names:
            raise ValueError("--judge is empty")
        keys = [_pick(n, versions, store) for n in names]
        if len(set(keys)) != len(keys):
            raise ValueError(f"--judge {spec!r} names the same judge twice")
    if len(keys) == 1:
        return LabelView(tuple(keys), _describe(keys[0], versions[keys[0][0]]),
                         run_severity(store))
    parts = ", ".join(_describe(k, [k[1]]) for k in keys)
    return LabelView(tuple(keys),
                     f"{ENSEMBLE} (majority of {parts}; ties go to the more severe label)",
                     run_severity(store))


def failure_kinds(store: RunStore, judge: JudgeKey) -> Counter[str]:
    """Why a judge left replies unjudged: stored reasons grouped by
    :func:`medpress.judges.llm.error_kind` (per-reply details dropped)."""
    from medpress.judges.llm import error_kind

    kinds: Counter[str] = Counter()
    for error, n in store.judgment_errors(*judge).items():
        kinds[error_kind(error)] += n
    return kinds


def verdicts(store: RunStore, judges: Sequence[JudgeKey]) -> Verdicts:
    """turn -> (judge, version) -> the stored judgment row, for the given judges only."""
    wanted = set(judges)
    out: Verdicts = defaultdict(dict)
    for j in store.iter_judgments():
        key = (j["judge"], j["rubric_version"])
        if key in wanted:
            out[(j["condition"], j["repeat"], j["dialogue_id"], j["turn"])][key] = j
    return out


def _vote(by_judge: Mapping[JudgeKey, Mapping[str, Any]], judges: Sequence[JudgeKey],
          severity: Sequence[str] = SEVERITY
          ) -> tuple[str | None, str | None, list[tuple[JudgeKey, Mapping[str, Any]]]]:
    """(label, failure mode, the judgments that gave that label) for one turn; ties go to
    the label first in ``severity``."""
    rows = [(j, by_judge[j]) for j in judges if j in by_judge]
    label = majority([r["label"] for _, r in rows], severity)
    agree = [(j, r) for j, r in rows if label is not None and r["label"] == label]
    mode = next((r["failure_mode"] for _, r in agree if r["failure_mode"]), None)
    return label, mode, agree


def _tags(agree: Sequence[tuple[JudgeKey, Mapping[str, Any]]]) -> dict[str, str]:
    """The tags that go with a view's label: the first agreeing judge's that has any, as the
    failure mode is chosen (so a tag always comes from a judge that gave the label)."""
    return next((dict(r["tags"]) for _, r in agree if r.get("tags")), {})


@dataclass(frozen=True)
class TurnVerdict:
    """One turn as a view labels it, with each judge's part, for reading transcripts.

    ``label`` and ``failure_mode`` are what `label_rows` gives the metrics. ``evidence`` holds
    the quotes of the judges that gave that label, each as the judge wrote it (so each should
    be a span of the reply; empty quotes left out); ``rationale`` and ``errors`` are
    ``(judge, text)`` pairs of the judges that gave the label and of those that failed.
    ``votes`` is ``(judge, label)`` for every judge of the view that stored a verdict on the
    turn (None where it failed), in view order; a judge is named by its name alone unless the
    view holds two versions of it (then ``name@version``).
    """

    label: str | None
    failure_mode: str | None
    evidence: tuple[str, ...]
    rationale: tuple[tuple[str, str], ...]
    errors: tuple[tuple[str, str], ...]
    votes: tuple[tuple[str, str | None], ...]
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def disagree(self) -> bool:
        """Whether the judges that gave a label did not all give the same one."""
        return disagrees([label for _, label in self.votes])


def turn_verdicts(store: RunStore, view: LabelView) -> dict[TurnKey, TurnVerdict]:
    """Every turn that a judge of ``view`` stored a verdict on (labelled or failed), with
    the view's label and each judge's part (`TurnVerdict`). Turns no judge of the view saw
    are absent: they are unjudged."""
    names = [name for name, _ in view.judges]
    shown = {j: j[0] if names.count(j[0]) == 1 else f"{j[0]}@{j[1]}" for j in view.judges}
    out: dict[TurnKey, TurnVerdict] = {}
    for turn, by_judge in verdicts(store, view.judges).items():
        label, mode, agree = _vote(by_judge, view.judges, view.severity)
        ordered = [(j, by_judge[j]) for j in view.judges if j in by_judge]
        out[turn] = TurnVerdict(
            label, mode,
            evidence=tuple(str(r["evidence"]) for _, r in agree if r.get("evidence")),
            rationale=tuple((shown[j], str(r["rationale"])) for j, r in agree
                            if r.get("rationale")),
            errors=tuple((shown[j], str(r.get("error") or "no reason recorded"))
                         for j, r in ordered if r["label"] is None),
            votes=tuple((shown[j], r["label"]) for j, r in ordered), tags=_tags(agree))
    return out


def turn_labels(store: RunStore, judge: str | None = None
                ) -> tuple[dict[TurnKey, dict[str, Any]], str]:
    """Per judged turn: ``label``, ``failure_mode`` and `DETAIL_FIELDS`, for exports.

    With one judge the details are its own. With several, ``evidence`` and ``rationale`` come
    from the judges that gave the majority label and ``error`` from those that failed, each
    prefixed with the judge's name. The view is chosen as in `resolve_view`.
    """
    view = resolve_view(store, judge)
    out: dict[TurnKey, dict[str, Any]] = {}
    several = len(view.judges) > 1
    for turn, by_judge in verdicts(store, view.judges).items():
        label, mode, agree = _vote(by_judge, view.judges, view.severity)
        failed = [(j, r) for j, r in by_judge.items() if r["label"] is None]
        out[turn] = {"label": label, "failure_mode": mode, "tags": _tags(agree) or None,
                     "evidence": _join("evidence", agree, several),
                     "rationale": _join("rationale", agree, several),
                     "error": _join("error", failed, several)}
    return out, view.description


def _join(field: str, rows: Sequence[tuple[JudgeKey, Mapping[str, Any]]],
          named: bool) -> str | None:
    """One field of several judgments, each prefixed with its judge when ``named``."""
    parts = [(f"{j[0]}: " if named else "") + str(r[field]) for j, r in rows if r.get(field)]
    return "; ".join(parts) or None


def label_rows(store: RunStore, judge: str | LabelView | None = None, *,
               n_turns: Mapping[str, int] | None = None,
               name: str | None = None) -> tuple[list[LabelRow], str]:
    """Label rows for metrics and a description of where the labels came from.

    Every generated reply gets a row; a reply without a verdict is unjudged (label None).
    Turns whose generation failed get no row: with ``n_turns`` (dialogue id -> its number of
    turns in the dataset) the metrics count them as never generated, and dialogues keep their
    own length ``T``. ``name`` is the model name the rows carry (default: the run's model
    spec). With several judges the label is their majority (:mod:`medpress.judges.ensemble`).
    ``judge`` is a ``--judge`` spec (see `resolve_view`) or a view already resolved.
    """
    view = judge if isinstance(judge, LabelView) else resolve_view(store, judge)
    by_turn = verdicts(store, view.judges)
    model = name or (store.get_meta("model") or {}).get("spec", "?")
    lengths = n_turns or {}
    rows: list[LabelRow] = []
    for t in store.iter_turns():
        if t["error"] is not None:
            continue
        key = (t["condition"], t["repeat"], t["dialogue_id"], t["turn"])
        label, mode, agree = _vote(by_turn.get(key, {}), view.judges, view.severity)
        rows.append(LabelRow(model, t["condition"], t["dialogue_id"], t["family"], t["turn"],
                             label, mode, t["repeat"], lengths.get(t["dialogue_id"]),
                             tuple(sorted(_tags(agree).items()))))
    return rows, view.description


# The Asclepius rule: with at least this many judges, any two that disagree flag the reply.
REVIEW_MIN_JUDGES = 4


def disagreements(store: RunStore, view: LabelView | None = None) -> list[dict[str, Any]]:
    """Turns where the judges of ``view`` (default: the ensemble of every judge) that voted
    disagree, with each judge's label, for human review. With at least
    :data:`REVIEW_MIN_JUDGES` judges each is a reply flagged for review (any two of them
    disagree)."""
    view = view or resolve_view(store, ENSEMBLE)
    judges = view.judges
    out = []
    for key, by_judge in sorted(verdicts(store, judges).items()):
        labels = [by_judge[j]["label"] if j in by_judge else None for j in judges]
        if disagrees(labels):
            c, r, d, t = key
            out.append({"condition": c, "repeat": r, "dialogue_id": d, "turn": t,
                        "labels": dict(zip((j[0] for j in judges), labels, strict=True)),
                        "ensemble": majority(labels, view.severity)})
    return out


def review_note(store: RunStore, view: LabelView, name: str) -> str | None:
    """A report line counting the replies flagged for human review under the Asclepius rule
    (:data:`REVIEW_MIN_JUDGES` or more judges in ``view``, any two disagree); None with
    fewer judges."""
    k = len(view.judges)
    if k < REVIEW_MIN_JUDGES:
        return None
    flagged = len(disagreements(store, view))
    judged = len(verdicts(store, view.judges))
    return (f"{name}: {flagged} of {judged} judged replies flagged for human review: at least "
            f"two of its {k} judges disagree (`medpress disagreements {store.run_dir} "
            "--sheet FILE` writes them as a labelling sheet)")


def pairwise_labels(store: RunStore) -> dict[str, list[str | None]]:
    """judge -> labels over every judged turn in the same order (None where that judge failed)."""
    judges = resolve_view(store, ENSEMBLE).judges
    by_turn = verdicts(store, judges)
    keys = sorted(by_turn)
    return {j[0]: [by_turn[k][j]["label"] if j in by_turn[k] else None for k in keys]
            for j in judges}
