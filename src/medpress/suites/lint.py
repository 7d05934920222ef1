"""``data lint --suite``: the shipped-set rules that apply to any suite's records.

Structure (pressures, references) is checked by the suite's schema when loading; here: counts
against the manifest's ``expect``, turn lengths, near-duplicate user turns, the source
vocabulary and locale rules; that each ``mirrors`` id (for suites whose records may carry that
optional field, such as the benign twins) is a MedPRESS dialogue; and that the metrics and
references name labels of the rubric. MedPRESS-only rules (id prefixes, the deferral wording of
the AMBIGUOUS reference, the hard set) stay with :func:`medpress.dataset.lint`.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any

from medpress.dataset import Dataset, LintIssue, load_vocab, near_duplicates
from medpress.dataset.lint import (
    MAX_LENGTH_SEPARATION,
    NEAR_DUP_THRESHOLD,
    TURN_WORDS,
    service_issues,
)
from medpress.dataset.lint_hard import best_cut
from medpress.suites.manifest import Suite
from medpress.suites.records import record_lines

# An optional record field naming the MedPRESS dialogue a record mirrors (twins).
MIRRORS = "mirrors"


def _text(d: Any) -> str:
    refs = list(d.references.model_dump().values()) if d.references else []
    return "\n".join([*d.card.values(), d.rationale or "", *(t.text for t in d.turns), *refs])


def lint_suite(suite: Suite, ds: Dataset) -> list[LintIssue]:
    """Every issue of ``ds`` (the suite's records) under the rules above; empty when clean."""
    vocab = load_vocab()
    issues: list[LintIssue] = []
    expect = suite.manifest.expect
    counts = Counter(d.family for d in ds)
    if expect.records is not None and len(ds) != expect.records:
        issues.append(LintIssue("count", (), f"{len(ds)} records, expected {expect.records}"))
    if expect.per_stratum is not None:
        for fam, n in sorted(counts.items()):
            if n != expect.per_stratum:
                issues.append(LintIssue("count", (), f"{fam}: {n} records, expected "
                                        f"{expect.per_stratum}"))
    for d in ds:
        for i, t in enumerate(d.turns, 1):
            n = len(t.text.split())
            if not TURN_WORDS[0] <= n <= TURN_WORDS[1]:
                issues.append(LintIssue("length", (d.id,), f"turn {i} has {n} words "
                                        f"(allowed {TURN_WORDS[0]}-{TURN_WORDS[1]})"))
        for p in vocab.source_parts(d.source):
            if p not in vocab.bodies:
                issues.append(LintIssue("source", (d.id,), f"source {p!r} is not in the "
                                        "controlled vocabulary (data/lint/sources.yaml)"))
        if d.locale is not None and d.locale not in vocab.locales:
            issues.append(LintIssue("locale", (d.id,), f"unknown locale {d.locale!r}"))
        else:
            issues += service_issues(d, _text(d), vocab, "record")
    words: dict[str, list[int]] = defaultdict(list)
    for d in ds:
        for kind, text in (d.references.model_dump().items() if d.references else ()):
            words[kind].append(len(text.split()))
    for a, b in itertools.combinations(sorted(words), 2):
        if (sep := best_cut(words[a], words[b])) > MAX_LENGTH_SEPARATION:
            issues.append(LintIssue("length-predicts-label", (), f"a word count separates the "
                                    f"{a} and {b} references with balanced accuracy {sep:.2f} "
                                    f"(limit {MAX_LENGTH_SEPARATION})"))
    case = _cases(suite, ds)
    for a, ta, b, tb, sim in near_duplicates(list(ds), NEAR_DUP_THRESHOLD):
        if case and case[a] == case[b]:
            continue  # variants of one case share their facts by design
        issues.append(LintIssue("near-duplicate", (a, b), f"turn {ta} of {a} and turn {tb} of "
                                f"{b} are {sim:.2f} similar"))
    issues += variant_issues(suite, ds)
    issues += mirror_issues(suite, ds)
    issues += label_issues(suite)
    return issues


def _cases(suite: Suite, ds: Dataset) -> dict[str, str]:
    """Record id -> its case, for a suite of variants; empty otherwise."""
    v = suite.manifest.records.variants
    return {} if v is None else {d.id: str(getattr(d, v.group)) for d in ds}


def variant_issues(suite: Suite, ds: Dataset) -> list[LintIssue]:
    """For a suite of variants: each record's operator is the clean one or in the operators
    file; each case has exactly one clean record and each operator at most once; and all
    records of a case share their card (only the turns differ)."""
    v = suite.manifest.records.variants
    if v is None:
        return []
    ops, _ = suite.variant_info()
    where = record_lines(suite)
    out: list[LintIssue] = []
    by_case: dict[str, list[Any]] = defaultdict(list)
    for d in ds:
        op = str(getattr(d, v.operator))
        if op not in ops:
            out.append(LintIssue("variants", (d.id,), f"{where.get(d.id, '?')} [{d.id}] "
                                 f"{v.operator}: {op!r} is not {v.clean!r} or an operator of "
                                 f"{v.operators} ({', '.join(o for o in ops if o != v.clean)})"))
        by_case[str(getattr(d, v.group))].append(d)
    for case, members in sorted(by_case.items()):
        counts = Counter(str(getattr(d, v.operator)) for d in members)
        if counts[v.clean] != 1:
            out.append(LintIssue("variants", (case,), f"case {case}: {counts[v.clean]} "
                                 f"{v.clean!r} records (expected exactly 1)"))
        if twice := sorted(o for o, n in counts.items() if n > 1 and o != v.clean):
            out.append(LintIssue("variants", (case,), f"case {case}: operator(s) {twice} used "
                                 "more than once"))
        cards = {tuple(sorted((k, x) for k, x in d.card.items() if k != v.operator))
                 for d in members}
        if len(cards) > 1:
            out.append(LintIssue("variants", (case,), f"case {case}: its records' cards "
                                 "differ (only the turn text may change between variants)"))
    return out


def label_issues(suite: Suite) -> list[LintIssue]:
    """Metrics and references whose labels the suite's rubric lacks, and unknown metrics."""
    from medpress.judges.rubric import load_rubric
    from medpress.metrics.registry import REGISTRY

    m = suite.manifest
    rubric = load_rubric(suite.rubric_path)
    known = set(rubric.labels)
    out = []
    for spec in m.metrics:
        if spec.use not in REGISTRY:
            out.append(LintIssue("metrics", (), f"{spec.as_}: unknown metric {spec.use!r}"))
            continue
        d = REGISTRY[spec.use]
        try:
            need = d.labels(spec.args)
            tags = d.tag_values(spec.args) if d.tag_values else {}
        except (KeyError, TypeError, ValueError) as e:
            out.append(LintIssue("metrics", (), f"{spec.as_}: bad arguments {spec.args}: {e}"))
            continue
        if missing := sorted(need - known):
            out.append(LintIssue("metrics", (), f"{spec.as_}: labels {missing} are not in the "
                                 "rubric"))
        if d.variants:
            ops, _ = suite.variant_info()
            if not ops:
                out.append(LintIssue("metrics", (), f"{spec.as_}: {spec.use} needs "
                                     "records.variants in the manifest"))
            elif unknown := sorted(set(spec.args.get("operators") or ()) - set(ops)):
                out.append(LintIssue("metrics", (), f"{spec.as_}: operators {unknown} are not "
                                     "in the operators file"))
        for name, values in tags.items():
            if name not in rubric.tags:
                out.append(LintIssue("metrics", (), f"{spec.as_}: the rubric asks for no tag "
                                     f"{name!r}"))
            elif missing := sorted(values - set(rubric.tags[name])):
                out.append(LintIssue("metrics", (), f"{spec.as_}: {missing} are not values of "
                                     f"tag {name!r}"))
    if missing := sorted(set(m.references.values()) - known):
        out.append(LintIssue("references", (), f"labels {missing} are not in the rubric"))
    return out


def mirror_issues(suite: Suite, ds: Dataset) -> list[LintIssue]:
    """Each ``mirrors`` value that is not a MedPRESS dialogue id, as ``file:line [id] mirrors:``
    (only for suites that declare ``mirrors`` among ``records.optional``)."""
    if MIRRORS not in suite.manifest.records.optional:
        return []
    from medpress.dataset import load_shipped

    known = {d.id for d in load_shipped()}
    where = record_lines(suite)
    out = []
    for d in ds:
        target = getattr(d, MIRRORS, None)
        if target is not None and target not in known:
            out.append(LintIssue("mirrors", (), f"{where.get(d.id, '?')} [{d.id}] "
                                 f"{MIRRORS}: {target!r} is not a dialogue of the medpress "
                                 "suite"))
    return out
