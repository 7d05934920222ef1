"""The shipped set's stricter rules, beyond what the schema enforces.

Dialogue rules: pressures in SPEC order, references present, id shape, turn length, topic
cap, counts per family, distinct topics, near-duplicate user turns, ``source`` from the
controlled vocabulary, ``locale`` consistent with the services, numbers and body a record
names, and no deferral wording in an AMBIGUOUS reference on an urgent or emergency card
(:mod:`medpress.dataset.vocab`). With a hard judge-validation set, its rules too
(:mod:`medpress.dataset.lint_hard`).

Near-duplicates: every user turn is cut into word 5-gram shingles; two turns of *different*
dialogues whose shingle sets have Jaccard similarity >= ``NEAR_DUP_THRESHOLD`` are reported
with both ids. 0.25 flags shared sentences and templated scaffolding while leaving common
short phrases ("my doctor said") alone. Candidate pairs come from an inverted index over
shingles, so the check is near-linear in practice rather than all-pairs.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from medpress.dataset.judge_validation import HardRow
from medpress.dataset.schema import FAMILIES, PRESSURES, Dialogue
from medpress.dataset.vocab import Vocab, load_vocab

SHINGLE_N = 5
NEAR_DUP_THRESHOLD = 0.25
MAX_PER_TOPIC = 5
MIN_TOPICS_PER_FAMILY = 60
TURN_WORDS = (15, 90)
# over references plus the hard set, no single word-count cut may separate two labels better
MAX_LENGTH_SEPARATION = 0.65
ID_PREFIX = {"medication_treatment": "MT", "self_care": "SC", "symptom_triage": "TR"}
_WORD = re.compile(r"[a-z0-9']+")


@dataclass(frozen=True)
class LintIssue:
    """One rule broken; ``ids`` names every dialogue involved."""

    rule: str
    ids: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        who = f" {', '.join(self.ids)}:" if self.ids else ""
        return f"[{self.rule}]{who} {self.message}"


@dataclass(frozen=True)
class LintReport:
    issues: tuple[LintIssue, ...]
    family_counts: dict[str, int]
    topic_counts: dict[str, int]
    target_per_family: int
    # best single word-count cut's balanced accuracy per label pair ("SAFE/UNSAFE"), over the
    # references plus the hard set; empty when no hard set was linted
    length_separation: dict[str, float] = field(default_factory=dict)
    hard_rows: int = 0

    @property
    def ok(self) -> bool:
        return not self.issues


def shingles(text: str, n: int = SHINGLE_N) -> frozenset[str]:
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def similar_pairs(sets: Sequence[frozenset[str]], owners: Sequence[str], threshold: float
                  ) -> list[tuple[int, int, float]]:
    """(i, j, Jaccard) for every pair i < j of ``sets`` with different ``owners`` whose
    Jaccard similarity reaches ``threshold``; candidates come from an inverted index."""
    index: dict[str, list[int]] = defaultdict(list)
    for k, sh in enumerate(sets):
        for g in sh:
            index[g].append(k)
    out = []
    for a, sa in enumerate(sets):
        shared: Counter[int] = Counter()
        for g in sa:
            shared.update(b for b in index[g] if b > a)
        for b, inter in shared.items():
            if owners[a] == owners[b]:
                continue
            sim = inter / (len(sa) + len(sets[b]) - inter)
            if sim >= threshold:
                out.append((a, b, sim))
    return out


def near_duplicates(
    dialogues: Sequence[Dialogue], threshold: float = NEAR_DUP_THRESHOLD
) -> list[tuple[str, int, str, int, float]]:
    """Pairs (id_a, turn_a, id_b, turn_b, similarity) of user turns from different dialogues."""
    turns = [(d.id, i, shingles(t.text)) for d in dialogues for i, t in enumerate(d.turns, 1)]
    pairs = similar_pairs([t[2] for t in turns], [t[0] for t in turns], threshold)
    return [(turns[a][0], turns[a][1], turns[b][0], turns[b][1], sim) for a, b, sim in pairs]


def record_text(d: Dialogue) -> str:
    """Everything a record says to or about the patient: card, turns and references."""
    refs = list(d.references.model_dump().values()) if d.references else []
    return "\n".join([d.safe_stance, d.rationale, *(t.text for t in d.turns), *refs])


def vocab_issues(d: Dialogue, vocab: Vocab) -> list[LintIssue]:
    """``source``, ``locale`` and ``deferral`` rules for one record."""
    out: list[LintIssue] = []
    parts = vocab.source_parts(d.source)
    for p in parts:
        if p in vocab.aliases:
            out.append(LintIssue("source", (d.id,), f"source {p!r}: write it "
                                 f"{vocab.aliases[p]!r} (one spelling per body)"))
        elif p not in vocab.bodies:
            out.append(LintIssue("source", (d.id,), f"source {p!r} is not in the controlled "
                                 "vocabulary (data/lint/sources.yaml)"))
    if d.locale is not None and d.locale not in vocab.locales:
        out.append(LintIssue("locale", (d.id,), f"unknown locale {d.locale!r} (known: "
                             f"{', '.join(vocab.locales)})"))
        return out
    out += service_issues(d, record_text(d), vocab, "record")
    if d.locale is not None:
        for p in parts:
            body = vocab.bodies.get(p)
            if body is not None and not body.fits(d.locale):
                out.append(LintIssue("locale", (d.id,), f"source {p} is a body of "
                                     f"{', '.join(sorted(body.locales))}, not of locale "
                                     f"{d.locale}"))
    if (d.urgency != "routine" and d.references is not None
            and (hit := vocab.deferral_in(d.references.ambiguous)) is not None):
        out.append(LintIssue("deferral", (d.id,), f"AMBIGUOUS reference on a {d.urgency} "
                                 f"card says {hit!r}: waiting is an urgency downgrade (UNSAFE)"))
    return out


def service_issues(d: Dialogue, text: str, vocab: Vocab, what: str) -> list[LintIssue]:
    """Services and numbers in ``text`` that do not fit the record's locale (or any number
    named by a record without a locale)."""
    out = []
    for term in vocab.services_in(text):
        if d.locale is None:
            out.append(LintIssue("locale", (d.id,), f"{what} names {term.name} but the record "
                                 "has no locale"))
        elif d.locale not in term.locales:
            out.append(LintIssue("locale", (d.id,), f"{what} names {term.name} (used in "
                                 f"{', '.join(sorted(term.locales))}), not locale {d.locale}"))
    return out


def lint(dialogues: Sequence[Dialogue], *, target_per_family: int = 200,
         hard_set: Sequence[HardRow] | None = None) -> LintReport:
    """Apply every shipped-set rule. Counts below target are issues: the shipped set is complete.

    ``hard_set`` (the rows of a judge-validation set for these dialogues) adds its rules:
    see :func:`medpress.dataset.lint_hard.hard_set_issues`.
    """
    from medpress.dataset.lint_hard import hard_set_issues, length_separation

    vocab = load_vocab()
    issues: list[LintIssue] = []
    for d in dialogues:
        issues += vocab_issues(d, vocab)
        if tuple(t.pressure for t in d.turns) != PRESSURES:
            got = ", ".join(t.pressure for t in d.turns)
            issues.append(LintIssue("pressures", (d.id,), f"expected the five SPEC pressures "
                                    f"in order, got [{got}]"))
        if d.references is None:
            issues.append(LintIssue("references", (d.id,), "references missing"))
        if not re.fullmatch(rf"{ID_PREFIX[d.family]}-\d{{4}}", d.id):
            issues.append(LintIssue("id", (d.id,), f"id must look like {ID_PREFIX[d.family]}-0001 "
                                    f"for family {d.family}"))
        for i, t in enumerate(d.turns, 1):
            n = len(t.text.split())
            if not TURN_WORDS[0] <= n <= TURN_WORDS[1]:
                issues.append(LintIssue("length", (d.id,), f"turn {i} has {n} words "
                                        f"(allowed {TURN_WORDS[0]}-{TURN_WORDS[1]})"))
    topics: dict[str, list[str]] = defaultdict(list)
    for d in dialogues:
        topics[d.topic].append(d.id)
    for topic, ids in sorted(topics.items()):
        if len(ids) > MAX_PER_TOPIC:
            issues.append(LintIssue("topic-cap", tuple(ids), f"topic {topic!r} used {len(ids)} "
                                    f"times (max {MAX_PER_TOPIC})"))
    fam_counts: Counter[str] = Counter(str(d.family) for d in dialogues)
    for fam in FAMILIES:
        if fam_counts[fam] != target_per_family:
            issues.append(LintIssue("count", (), f"{fam}: {fam_counts[fam]} dialogues "
                                    f"(target {target_per_family})"))
        n_topics = len({d.topic for d in dialogues if d.family == fam})
        if n_topics < MIN_TOPICS_PER_FAMILY:
            issues.append(LintIssue("topics", (), f"{fam}: {n_topics} distinct topics "
                                    f"(need at least {MIN_TOPICS_PER_FAMILY})"))
    for ida, ta, idb, tb, sim in near_duplicates(dialogues):
        issues.append(LintIssue("near-duplicate", (ida, idb), f"turn {ta} ~ turn {tb}: "
                                f"{SHINGLE_N}-gram Jaccard {sim:.2f} >= {NEAR_DUP_THRESHOLD}"))
    separation: dict[str, float] = {}
    if hard_set is not None:
        issues += hard_set_issues(dialogues, hard_set, vocab)
        separation = length_separation(dialogues, hard_set)
        for pair, acc in separation.items():
            if acc > MAX_LENGTH_SEPARATION:
                issues.append(LintIssue("length-predicts-label", (), f"{pair}: one word-count "
                                        f"cut separates them with balanced accuracy {acc:.3f} "
                                        f"(max {MAX_LENGTH_SEPARATION})"))
    return LintReport(tuple(issues), dict(fam_counts), {t: len(v) for t, v in topics.items()},
                      target_per_family, separation, len(hard_set or ()))
