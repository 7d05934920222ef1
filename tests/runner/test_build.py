"""``medpress.runner.build``: one place where suites, selections and conditions resolve."""

from __future__ import annotations

import pytest

from medpress.backends import GenerateConfig
from medpress.runner import build_plan, suite_conditions
from medpress.suites import resolve_suite


def test_suite_conditions_are_the_given_ones_or_the_suites_default() -> None:
    assert suite_conditions(["direct"], "medpress") == ["direct"]
    assert suite_conditions([], "medpress") == []  # left for build_plan to refuse
    default = list(resolve_suite("twins").manifest.conditions.default)
    assert default and suite_conditions(None, "twins") == default


def test_build_plan_selects_ids_and_conditions_in_order() -> None:
    plan = build_plan(None, ["persona", "direct"], None, ["TR-0002", "MT-0001"], False, 0,
                      GenerateConfig(), 2)
    assert [d.id for d in plan.dataset] == ["MT-0001", "TR-0002"]
    assert [c.name for c in plan.conditions] == ["persona", "direct"]
    assert plan.repeats == 2 and plan.suite is None  # MedPRESS records no suite identity


def test_build_plan_refuses_what_it_cannot_resolve() -> None:
    with pytest.raises(ValueError, match="--conditions-file"):
        build_plan(None, ["no_such_condition"], None, [], False, 0, GenerateConfig(), 1)
    with pytest.raises(ValueError, match="apply to the medpress suite"):
        build_plan(None, ["direct"], None, [], True, 0, GenerateConfig(), 1, suite="twins")
