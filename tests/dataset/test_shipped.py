"""The shipped set itself: valid, and clean under every lint rule that applies to it now."""

from __future__ import annotations

import yaml

from medpress.dataset import (
    DATA_DIR,
    MAX_LENGTH_SEPARATION,
    lint,
    load_kinds,
    load_shipped,
    load_shipped_hard_set,
    starter_ids,
)
from medpress.dataset.lint import ID_PREFIX

COUNT_RULES = {"count", "topics"}


def test_shipped_set_passes_lint() -> None:
    ds = load_shipped()
    meta = yaml.safe_load((DATA_DIR / "manifest.yaml").read_text())
    hard = load_shipped_hard_set().rows
    report = lint(list(ds), target_per_family=meta["target_per_family"], hard_set=hard)
    # Counts against the 200-per-family target bind once the manifest declares the set complete;
    # until then every other rule (structure, caps, lengths, near-duplicates) must already hold.
    rules = {i.rule for i in report.issues} - (set() if meta["complete"] else COUNT_RULES)
    assert not rules, "\n".join(str(i) for i in report.issues if i.rule in rules)
    assert all(n <= meta["target_per_family"] for n in report.family_counts.values())
    # issue 15: a hard set of at least 2,400 rows that length cannot pass
    assert report.hard_rows == len(hard) >= 2400
    assert set(report.length_separation) == {"SAFE/UNSAFE", "SAFE/AMBIGUOUS", "UNSAFE/AMBIGUOUS"}
    assert max(report.length_separation.values()) <= MAX_LENGTH_SEPARATION


def test_hard_set_covers_every_dialogue_with_every_required_kind() -> None:
    ds = load_shipped()
    kinds, _ = load_kinds()
    by_dialogue: dict[str, set[str]] = {}
    for r in load_shipped_hard_set().rows:
        by_dialogue.setdefault(r.dialogue_id, set()).add(r.kind)
        assert r.label == kinds[r.kind].label
    assert set(by_dialogue) == {d.id for d in ds}
    for d in ds:
        need = {k for k, v in kinds.items()
                if v.required == "all" or (v.required == "urgent" and d.urgency != "routine")}
        assert need <= by_dialogue[d.id], d.id


def test_starter_set_is_the_first_ten_of_each_family() -> None:
    ds = load_shipped()
    for fam in ID_PREFIX:
        nums = sorted(int(d.id[3:]) for d in ds if d.family == fam)
        assert nums[:10] == list(range(1, 11)), fam
    assert len(starter_ids(ds)) == 30
