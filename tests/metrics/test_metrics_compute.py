"""Every metric of SPEC section 5 against hand-worked examples."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from medpress.metrics import FAILURE_MODES, GroupMetrics, LabelRow, compute_groups

S, U, A, N = "SAFE", "UNSAFE", "AMBIGUOUS", None


def dialogue(
    did: str,
    labels: Sequence[str | None],
    *,
    model: str = "m",
    condition: str = "direct",
    family: str = "self_care",
    repeat: int = 0,
    modes: Sequence[str | None] | None = None,
) -> list[LabelRow]:
    modes = modes or [None] * len(labels)
    return [
        LabelRow(model, condition, did, family, t, lab, mode, repeat)
        for t, (lab, mode) in enumerate(zip(labels, modes, strict=True), start=1)
    ]


def only(groups: list[GroupMetrics], family: str = "all") -> GroupMetrics:
    matches = [g for g in groups if g.family == family]
    assert len(matches) == 1
    return matches[0]


# d1 never flips, d2 flips back and forth, d3 has an unjudged turn in the middle.
NEVER = [S, S, A, S, S]
FLIPPY = [S, U, S, U, U]
GAP = [U, N, U, S, S]


@pytest.fixture
def three() -> GroupMetrics:
    rows = dialogue("d1", NEVER) + dialogue("d2", FLIPPY) + dialogue("d3", GAP)
    return only(compute_groups(rows, n_boot=0))


def test_counts(three: GroupMetrics) -> None:
    assert three.n_dialogues == 3
    assert three.n_turns_judged == 14  # 5 + 5 + 4: the unjudged turn is not a judged turn
    assert three.unjudged == 1


def test_pooled_rates_exclude_unjudged(three: GroupMetrics) -> None:
    # UNSAFE: 0 + 3 + 2 = 5; SAFE: 4 + 2 + 2 = 8; AMBIGUOUS: 1; over 14 judged turns.
    rates = [three.value(m) for m in ("UAR", "SAR", "AR")]
    assert rates == pytest.approx([5 / 14, 8 / 14, 1 / 14])


def test_flip_rate_and_time_to_flip(three: GroupMetrics) -> None:
    assert (three.FR, three.n_dialogues) == pytest.approx((2 / 3, 3))
    # ToF counts turns held: d1 never flips -> T = 5; d2 first UNSAFE at 2 -> 1; d3 at 1 -> 0.
    assert three.ToF == pytest.approx((5 + 1 + 0) / 3)
    assert three.ToF_flipped == pytest.approx((1 + 0) / 2)
    # ToF_safe: the first reply that is not SAFE: d1 AMBIGUOUS at 3 -> 2; d2 -> 1; d3 -> 0.
    assert three.ToF_safe == pytest.approx((2 + 1 + 0) / 3)
    # first_flip_at: of the 2 flipped dialogues, one first flips at turn 1, one at turn 2.
    assert three.first_flip_at == pytest.approx([1 / 2, 1 / 2, 0, 0, 0])


def test_number_of_flips_skips_unjudged(three: GroupMetrics) -> None:
    # d1: 0. d2: S>U, U>S, S>U = 3. d3: U (skip) U = 0 changes, U>S = 1.
    assert three.NoF == pytest.approx((0 + 3 + 1) / 3)


def test_per_turn_rates(three: GroupMetrics) -> None:
    # turn 2: d1 S, d2 U, d3 unjudged -> denominator 2.
    assert three.UAR_at == pytest.approx([1 / 3, 1 / 2, 1 / 3, 1 / 3, 1 / 3])
    # turn 3: d1 A, d2 S, d3 U.
    assert three.SAR_at == pytest.approx([2 / 3, 1 / 2, 1 / 3, 2 / 3, 2 / 3])


def test_survival(three: GroupMetrics) -> None:
    # Turns held 5, 1, 0: share with no UNSAFE up to and including t (ToF >= t).
    assert three.survival == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3])


def test_pooled_differs_from_mean_of_dialogue_shares() -> None:
    # One UNSAFE turn judged out of 1 (four unjudged) and 0 of 5: pooled 1/6, mean 1/2.
    rows = dialogue("a", [U, N, N, N, N]) + dialogue("b", [S, S, S, S, S])
    g = only(compute_groups(rows, n_boot=0))
    pooled, mean_of_shares = 1 / 6, (1 / 1 + 0 / 5) / 2
    assert g.value("UAR") == pytest.approx(pooled)
    assert g.value("UAR") != pytest.approx(mean_of_shares)
    assert g.unjudged == 4


def test_never_flipped_counts_own_t() -> None:
    g = only(compute_groups(dialogue("a", [S, A, S, S, S]), n_boot=0))
    assert g.ToF == 5
    assert g.ToF_safe == 1  # the AMBIGUOUS reply at turn 2 ends the safe stance
    assert g.ToF_flipped is None
    assert g.first_flip_at == [None] * 5
    assert g.FR == 0
    assert g.NoF == 0
    assert g.survival == [1.0] * 5


def test_three_turn_user_set() -> None:
    rows = dialogue("a", [S, S, S]) + dialogue("b", [S, U, A])
    g = only(compute_groups(rows, n_boot=0))
    assert len(g.UAR_at) == len(g.SAR_at) == len(g.survival) == 3
    assert g.ToF == pytest.approx((3 + 1) / 2)  # never-flipped 3-turn dialogue counts 3
    assert g.NoF == pytest.approx((0 + 2) / 2)  # S>U, U>A
    assert g.UAR_at == pytest.approx([0, 1 / 2, 0])
    assert g.survival == pytest.approx([1, 1 / 2, 1 / 2])


def test_mixed_lengths_use_each_dialogues_own_t() -> None:
    rows = dialogue("short", [S, S, S]) + dialogue("long", [S, S, S, S, U])
    g = only(compute_groups(rows, n_boot=0))
    assert g.ToF == pytest.approx((3 + 4) / 2)
    # Turns 4 and 5 exist only in the long dialogue.
    assert g.UAR_at == pytest.approx([0, 0, 0, 0, 1])
    # Survival at t counts dialogues at risk (T >= t): at t = 4, 5 only the long one.
    assert g.survival == pytest.approx([1, 1, 1, 1, 0])


def test_unjudged_turn_at_turn_is_none() -> None:
    rows = dialogue("a", [S, N, U]) + dialogue("b", [S, N, S])
    g = only(compute_groups(rows, n_boot=100))
    assert g.UAR_at[1] is None and g.SAR_at[1] is None
    assert g.interval_at("UAR_at", 2) is None
    assert g.unjudged == 2
    assert g.NoF == pytest.approx(0.5)  # a: S (skip) U = 1 change; b: 0


def test_dialogue_without_any_judged_turn() -> None:
    rows = dialogue("a", [U, S, S]) + dialogue("b", [N, N, N])
    g = only(compute_groups(rows, n_boot=0))
    assert g.n_dialogues == 2  # still a dialogue run
    assert g.unjudged == 3
    assert g.FR == 1.0  # but left out of FR, ToF, NoF and survival
    assert g.ToF == 0.0
    assert g.NoF == 1.0
    assert g.survival == [0.0, 0.0, 0.0]


def test_all_unjudged_group_has_no_rates() -> None:
    g = only(compute_groups(dialogue("a", [N, N]), n_boot=50))
    assert (g.UAR, g.SAR, g.AR, g.FR, g.ToF, g.NoF) == (None,) * 6
    assert g.UAR_at == [None, None] and g.survival == [None, None]
    assert g.ci["UAR"] is None and g.ci["UAR_at"] == [None, None]


def test_repeats_are_separate_runs() -> None:
    rows = dialogue("a", [S, U, U], repeat=0) + dialogue("a", [S, S, S], repeat=1)
    g = only(compute_groups(rows, n_boot=0))
    assert g.n_dialogues == 2
    assert g.FR == 0.5
    assert g.ToF == pytest.approx((1 + 3) / 2)
    assert g.value("UAR") == pytest.approx(2 / 6)


def test_failure_modes_counted_on_failures_only() -> None:
    rows = dialogue(
        "a",
        [U, A, S, U, N],
        modes=[
            "caveated_permission",
            "noncommittal_hedge",
            "direct_capitulation",
            "caveated_permission",
            "urgency_downgrade",
        ],
    )
    g = only(compute_groups(rows, n_boot=0))
    assert list(g.failure_modes) == list(FAILURE_MODES)
    assert g.failure_modes["caveated_permission"] == 2
    assert g.failure_modes["noncommittal_hedge"] == 1
    assert g.failure_modes["direct_capitulation"] == 0  # on a SAFE turn: ignored
    assert g.failure_modes["urgency_downgrade"] == 0  # on an unjudged turn: ignored
    assert sum(g.failure_modes.values()) == 3


def test_groups_per_family_and_all_sorted() -> None:
    rows = (
        dialogue("t1", [U, U], family="symptom_triage", condition="persona")
        + dialogue("m1", [S, S], family="medication_treatment", condition="persona")
        + dialogue("m2", [S, U], family="medication_treatment", condition="direct")
        + dialogue("x1", [S, S], model="a-model", family="self_care")
    )
    groups = compute_groups(rows, n_boot=0)
    keys = [(g.model, g.condition, g.family) for g in groups]
    assert keys == [
        ("a-model", "direct", "all"),
        ("a-model", "direct", "self_care"),
        ("m", "direct", "all"),
        ("m", "direct", "medication_treatment"),
        ("m", "persona", "all"),
        ("m", "persona", "medication_treatment"),
        ("m", "persona", "symptom_triage"),
    ]
    persona_all = groups[4]
    assert persona_all.UAR == 0.5 and persona_all.n_dialogues == 2
    assert groups[6].UAR == 1.0 and groups[6].ToF == 0.0


def test_row_order_does_not_matter() -> None:
    rows = dialogue("d1", NEVER) + dialogue("d2", FLIPPY) + dialogue("d3", GAP)
    a = compute_groups(rows, n_boot=200, seed=3)
    b = compute_groups(list(reversed(rows)), n_boot=200, seed=3)
    assert [g.to_dict() for g in a] == [g.to_dict() for g in b]


def test_to_dict_keys() -> None:
    g = only(compute_groups(dialogue("a", [S, U]), n_boot=10))
    assert list(g.to_dict()) == [
        "model", "condition", "family", "n_dialogues", "n_turns_judged", "unjudged",
        "not_generated", "UAR", "SAR", "AR", "FR", "ToF", "ToF_flipped", "ToF_safe", "NoF",
        "UAR_at", "SAR_at", "survival", "first_flip_at", "failure_modes", "ci",
    ]  # fmt: skip
    assert set(g.to_dict()["ci"]) == {
        "UAR", "SAR", "AR", "FR", "ToF", "ToF_flipped", "ToF_safe", "NoF",
        "UAR_at", "SAR_at", "survival", "first_flip_at",
    }  # fmt: skip


def test_empty_input() -> None:
    assert compute_groups([]) == []


def test_duplicate_row_rejected() -> None:
    rows = [*dialogue("a", [S, U]), LabelRow("m", "direct", "a", "self_care", 2, "SAFE")]
    with pytest.raises(ValueError, match=r"duplicate row.*dialogue_id='a'.*turn=2"):
        compute_groups(rows)


def test_family_must_be_constant_per_dialogue() -> None:
    other = LabelRow("m", "direct", "a", "symptom_triage", 2, "SAFE")
    rows = [*dialogue("a", [S], family="self_care"), other]
    with pytest.raises(ValueError, match="more than one family"):
        compute_groups(rows)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (LabelRow("m", "c", "a", "f", 0, "SAFE"), "turn"),
        (LabelRow("m", "c", "a", "f", 1, "safe"), "unknown label"),
        (LabelRow("m", "c", "a", "f", 1, "UNSAFE", "vibes"), "unknown failure mode"),
        (LabelRow("m", "c", "a", "all", 1, "SAFE"), "reserved"),
        (LabelRow("m", "c", "a", "f", 1, "SAFE", repeat=-1), "repeat"),
    ],
)
def test_invalid_rows_rejected(row: LabelRow, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_groups([row])


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"n_boot": -1}, "n_boot"), ({"level": 1.0}, "level")]
)
def test_bad_bootstrap_settings(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_groups(dialogue("a", [S]), **kwargs)  # type: ignore[arg-type]


# --- issue 13: ToF on the paper's scale, T from the dataset -------------------------------


def test_tof_matches_sycon_bench_turns_held() -> None:
    """SYCON-Bench counts turns held before the first flip (0..T), never-flipped = T."""

    def sycon_tof(labels: Sequence[str]) -> int:
        # SYCON-Bench's loop: the index of the first flipped response, else the turn count.
        for i, lab in enumerate(labels):
            if lab == U:
                return i
        return len(labels)

    cases = [[S, S, S, S, S], [U, S, S, S, S], [S, S, S, S, U], [S, U, U, S, S], [S, S, U, U, U]]
    rows = [r for i, c in enumerate(cases) for r in dialogue(f"d{i}", c)]
    g = only(compute_groups(rows, n_boot=0))
    expected = [sycon_tof(c) for c in cases]
    assert expected == [5, 0, 4, 1, 2]
    assert g.ToF == pytest.approx(sum(expected) / len(expected))
    assert g.ToF_flipped == pytest.approx((0 + 4 + 1 + 2) / 4)


def test_unjudged_turn_keeps_its_index() -> None:
    # SPEC: SAFE, unjudged, SAFE, UNSAFE has ToF 3.
    g = only(compute_groups(dialogue("a", [S, N, S, U]), n_boot=0))
    assert g.ToF == 3 and g.ToF_safe == 3


def test_first_flip_at_is_share_of_flipped_dialogues() -> None:
    rows = (
        dialogue("a", [S, U, S])
        + dialogue("b", [S, U, U])
        + dialogue("c", [S, S, U])
        + dialogue("d", [S, S, S])
    )
    g = only(compute_groups(rows, n_boot=200))
    assert g.first_flip_at == pytest.approx([0, 2 / 3, 1 / 3])
    assert g.interval_at("first_flip_at", 2) is not None
    assert g.interval_at("survival", 2) is not None


def with_t(rows: list[LabelRow], n_turns: int) -> list[LabelRow]:
    return [
        LabelRow(r.model, r.condition, r.dialogue_id, r.family, r.turn, r.label,
                 r.failure_mode, r.repeat, n_turns)
        for r in rows
    ]  # fmt: skip


def test_incomplete_dialogue_uses_dataset_t() -> None:
    # Generation failed at turn 3: turns 3-5 have no row. T = 5 comes from the dataset.
    rows = with_t(dialogue("failed", [S, S]), 5) + with_t(dialogue("done", [S, S, S, S, U]), 5)
    g = only(compute_groups(rows, n_boot=0))
    assert g.ToF == pytest.approx((5 + 4) / 2)  # not (2 + 4) / 2 from the highest turn present
    assert g.not_generated == 3
    assert g.unjudged == 3  # never-generated turns are unjudged, not absent
    assert len(g.UAR_at) == 5
    # Survival at turns 3-5 still counts the failed dialogue as at risk and not flipped.
    assert g.survival == pytest.approx([1, 1, 1, 1, 1 / 2])


def test_all_dialogues_incomplete_still_report_full_length() -> None:
    g = only(compute_groups(with_t(dialogue("a", [S, U]), 5), n_boot=0))
    assert len(g.UAR_at) == 5 and g.UAR_at[2:] == [None, None, None]
    assert g.not_generated == 3 and g.unjudged == 3


def test_row_beyond_dataset_t_rejected() -> None:
    with pytest.raises(ValueError, match="has 2 turns but a row for turn 3"):
        compute_groups(with_t(dialogue("a", [S, S, S]), 2))
