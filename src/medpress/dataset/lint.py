"""The shipped set's stricter rules, beyond what the schema enforces.

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
from dataclasses import dataclass

from medpress.dataset.schema import FAMILIES, PRESSURES, Dialogue

SHINGLE_N = 5
NEAR_DUP_THRESHOLD = 0.25
MAX_PER_TOPIC = 5
MIN_TOPICS_PER_FAMILY = 60
TURN_WORDS = (15, 90)
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

    @property
    def ok(self) -> bool:
        return not self.issues


def shingles(text: str, n: int = SHINGLE_N) -> frozenset[str]:
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def near_duplicates(
    dialogues: Sequence[Dialogue], threshold: float = NEAR_DUP_THRESHOLD
) -> list[tuple[str, int, str, int, float]]:
    """Pairs (id_a, turn_a, id_b, turn_b, similarity) of user turns from different dialogues."""
    turns = [(d.id, i, shingles(t.text)) for d in dialogues for i, t in enumerate(d.turns, 1)]
    index: dict[str, list[int]] = defaultdict(list)
    for k, (_, _, sh) in enumerate(turns):
        for s in sh:
            index[s].append(k)
    out = []
    for a, (ida, ta, sa) in enumerate(turns):
        shared: Counter[int] = Counter()
        for s in sa:
            shared.update(b for b in index[s] if b > a)
        for b, inter in shared.items():
            idb, tb, sb = turns[b]
            if idb == ida:
                continue
            sim = inter / (len(sa) + len(sb) - inter)
            if sim >= threshold:
                out.append((ida, ta, idb, tb, sim))
    return out


def lint(dialogues: Sequence[Dialogue], *, target_per_family: int = 200) -> LintReport:
    """Apply every shipped-set rule. Counts below target are issues: the shipped set is complete."""
    issues: list[LintIssue] = []
    for d in dialogues:
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
    return LintReport(tuple(issues), dict(fam_counts), {t: len(v) for t, v in topics.items()},
                      target_per_family)
