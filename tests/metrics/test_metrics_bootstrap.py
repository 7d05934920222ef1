"""Cluster-bootstrap intervals and paired differences."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from medpress.metrics import (
    LABELS,
    GroupMetrics,
    LabelRow,
    all_paired_differences,
    compute_groups,
    paired_difference,
)

METRICS = ("UAR", "SAR", "AR", "FR", "ToF", "NoF")


def synthetic(
    n_dialogues: int = 40,
    *,
    seed: int = 0,
    conditions: tuple[str, ...] = ("direct",),
    p_unsafe: float = 0.4,
    turns: int = 5,
) -> list[LabelRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for cond in conditions:
        for d in range(n_dialogues):
            for t in range(1, turns + 1):
                u = rng.random()
                label: str | None = (
                    "UNSAFE" if u < p_unsafe else "AMBIGUOUS" if u < p_unsafe + 0.2 else "SAFE"
                )
                if rng.random() < 0.05:
                    label = None
                rows.append(LabelRow("m", cond, f"D{d:03d}", "self_care", t, label))
    return rows


def pooled(groups: list[GroupMetrics]) -> GroupMetrics:
    return next(g for g in groups if g.family == "all")


def test_fixed_seed_is_deterministic() -> None:
    rows = synthetic()
    a = compute_groups(rows, n_boot=300, seed=7)
    b = compute_groups(rows, n_boot=300, seed=7)
    assert [g.to_dict() for g in a] == [g.to_dict() for g in b]


def test_different_seed_gives_different_interval() -> None:
    rows = synthetic()
    a = pooled(compute_groups(rows, n_boot=300, seed=1))
    b = pooled(compute_groups(rows, n_boot=300, seed=2))
    assert a.UAR == b.UAR
    assert a.ci["UAR"] != b.ci["UAR"]


def test_interval_covers_point_estimate() -> None:
    g = pooled(compute_groups(synthetic(), n_boot=500))
    for metric in METRICS:
        interval = g.interval(metric)
        value = g.value(metric)
        assert interval is not None and value is not None
        lo, hi = interval
        assert lo <= value <= hi, metric
        assert lo < hi, metric  # 40 varied dialogues: a real spread
    for t, value in enumerate(g.UAR_at, start=1):
        iv = g.interval_at("UAR_at", t)
        assert iv is not None and value is not None
        assert iv[0] <= value <= iv[1]


def test_interval_narrows_with_more_dialogues() -> None:
    small = pooled(compute_groups(synthetic(20, seed=4), n_boot=400)).interval("UAR")
    large = pooled(compute_groups(synthetic(500, seed=4), n_boot=400)).interval("UAR")
    assert small is not None and large is not None
    assert large[1] - large[0] < (small[1] - small[0]) / 2


def test_repeats_resampled_together() -> None:
    # One dialogue, two repeats: resampling the only dialogue always keeps both repeats,
    # so FR = 1/2 in every resample. Resampling runs independently would spread it.
    rows = [
        LabelRow("m", "direct", "a", "f", t, lab, None, rep)
        for rep, labels in enumerate([["SAFE", "UNSAFE"], ["SAFE", "SAFE"]])
        for t, lab in enumerate(labels, start=1)
    ]
    g = pooled(compute_groups(rows, n_boot=200))
    assert g.FR == 0.5 and g.ci["FR"] == [0.5, 0.5]


def test_vectorised_bootstrap_matches_naive_resampling() -> None:
    """Same draws as the implementation (default_rng(seed).integers over dialogues sorted by
    id), recomputed one resample at a time from the rows."""
    rows = synthetic(15, seed=5, turns=4)
    n_boot, seed, level = 200, 11, 0.9
    g = pooled(compute_groups(rows, n_boot=n_boot, seed=seed, level=level))
    ids = sorted({r.dialogue_id for r in rows})
    by_id = {d: [r for r in rows if r.dialogue_id == d] for d in ids}
    draws = np.random.default_rng(seed).integers(0, len(ids), size=(n_boot, len(ids)))
    uar, tof, nof = [], [], []
    for draw in draws:
        sample = [r for i in draw for r in by_id[ids[i]]]
        judged = [r for r in sample if r.label is not None]
        uar.append(sum(r.label == "UNSAFE" for r in judged) / len(judged))
        tofs, nofs = [], []
        for i in draw:
            labels = sorted((r.turn, r.label) for r in by_id[ids[i]] if r.label is not None)
            first = [t for t, lab in labels if lab == "UNSAFE"]
            tofs.append(first[0] - 1 if first else 4)  # turns held; T = 4
            states = [lab == "UNSAFE" for _, lab in labels]
            nofs.append(sum(x != y for x, y in itertools.pairwise(states)))
        tof.append(np.mean(tofs))
        nof.append(np.mean(nofs))
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    assert g.ci["UAR"] == pytest.approx(np.percentile(uar, q).tolist())
    assert g.ci["ToF"] == pytest.approx(np.percentile(tof, q).tolist())
    assert g.ci["NoF"] == pytest.approx(np.percentile(nof, q).tolist())


def test_level_widens_interval() -> None:
    rows = synthetic()
    narrow = pooled(compute_groups(rows, n_boot=400, level=0.5)).interval("UAR")
    wide = pooled(compute_groups(rows, n_boot=400, level=0.99)).interval("UAR")
    assert narrow is not None and wide is not None
    assert wide[0] < narrow[0] and narrow[1] < wide[1]


def test_no_bootstrap() -> None:
    g = pooled(compute_groups(synthetic(), n_boot=0))
    assert all(v is None for v in g.ci.values())


# ----------------------------------------------------------------------------- paired


def test_identical_conditions_give_exact_zero() -> None:
    rows = synthetic(30)
    copy = [
        LabelRow(r.model, "direct_anti", r.dialogue_id, r.family, r.turn, r.label) for r in rows
    ]
    for metric in METRICS:
        p = paired_difference(
            rows + copy, model="m", cond_a="direct", cond_b="direct_anti", metric=metric
        )
        assert p.diff == 0.0
        assert (p.lo, p.hi) == (0.0, 0.0)
        assert p.n_dialogues == 30


def test_paired_sign_and_interval() -> None:
    safe = synthetic(60, seed=1, conditions=("direct_anti",), p_unsafe=0.2)
    risky = synthetic(60, seed=2, conditions=("direct",), p_unsafe=0.6)
    p = paired_difference(safe + risky, model="m", cond_a="direct", cond_b="direct_anti")
    groups = {g.condition: g for g in compute_groups(safe + risky, n_boot=0)}
    assert p.value_a == groups["direct"].UAR and p.value_b == groups["direct_anti"].UAR
    assert p.diff is not None and p.lo is not None and p.hi is not None
    assert p.diff == pytest.approx(p.value_b - p.value_a)  # type: ignore[operator]
    assert p.diff < 0 and p.hi < 0  # B (anti) is clearly safer
    reverse = paired_difference(safe + risky, model="m", cond_a="direct_anti", cond_b="direct")
    assert reverse.diff == pytest.approx(-p.diff)
    tof = paired_difference(
        safe + risky, model="m", cond_a="direct", cond_b="direct_anti", metric="ToF"
    )
    assert tof.diff is not None and tof.diff > 0  # safer -> later first failure


def test_paired_uses_matched_dialogues_only() -> None:
    a = [LabelRow("m", "direct", d, "f", 1, "SAFE") for d in ("x", "y")]
    b = [
        LabelRow("m", "persona", "x", "f", 1, "UNSAFE"),
        LabelRow("m", "persona", "z", "f", 1, "SAFE"),
    ]  # z has no partner
    p = paired_difference(a + b, model="m", cond_a="direct", cond_b="persona", n_boot=50)
    assert p.n_dialogues == 1
    assert (p.value_a, p.value_b, p.diff) == (0.0, 1.0, 1.0)
    assert (p.lo, p.hi) == (1.0, 1.0)


def test_paired_family_filter() -> None:
    rows = [
        LabelRow("m", c, d, fam, 1, lab)
        for c, labs in (("direct", ("SAFE", "SAFE")), ("persona", ("UNSAFE", "SAFE")))
        for d, fam, lab in zip(("d1", "d2"), ("self_care", "symptom_triage"), labs, strict=True)
    ]
    p = paired_difference(rows, model="m", cond_a="direct", cond_b="persona", family="self_care")
    assert p.n_dialogues == 1 and p.diff == 1.0
    p = paired_difference(rows, model="m", cond_a="direct", cond_b="persona")
    assert p.n_dialogues == 2 and p.diff == 0.5


def test_paired_errors() -> None:
    rows = synthetic(5)
    with pytest.raises(ValueError, match="unknown metric"):
        paired_difference(rows, model="m", cond_a="direct", cond_b="direct", metric="XYZ")
    with pytest.raises(ValueError, match="present in both"):
        paired_difference(rows, model="m", cond_a="direct", cond_b="persona")


def test_all_paired_differences_defaults() -> None:
    four = synthetic(10, conditions=("direct", "persona", "direct_anti", "persona_anti"))
    other = [
        LabelRow("other", r.condition, r.dialogue_id, r.family, r.turn, r.label)
        for r in four
        if r.condition in ("direct", "direct_anti")
    ]
    diffs = all_paired_differences(four + other, metrics=("UAR",), n_boot=20)
    assert [(p.model, p.cond_a, p.cond_b) for p in diffs] == [
        ("m", "direct", "direct_anti"),
        ("m", "persona", "persona_anti"),
        ("m", "direct", "persona"),
        ("m", "direct_anti", "persona_anti"),
        ("other", "direct", "direct_anti"),  # "other" has only these two conditions
    ]
    assert all(p.metric == "UAR" and p.n_dialogues == 10 for p in diffs)


def test_labels_constant() -> None:
    assert LABELS == ("SAFE", "UNSAFE", "AMBIGUOUS")
