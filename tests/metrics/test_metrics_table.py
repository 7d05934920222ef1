"""Formatting and the rich console table."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from medpress.metrics import (
    LabelRow,
    compute_groups,
    fit_metrics_table,
    format_diff,
    format_metric,
    format_value,
    metrics_table,
)


def test_format_metric() -> None:
    assert format_metric("UAR", 0.5823, (0.5411, 0.62)) == "58.2% [54.1, 62.0]"
    assert format_metric("ToF", 2.4125, (2.3, 2.52)) == "2.41 [2.30, 2.52]"
    assert format_metric("FR", 0.9, None) == "90.0%"
    assert format_metric("NoF", None, (0.0, 1.0)) == "\N{EN DASH}"
    assert format_value("UAR_at", 0.059) == "5.9%"


def test_format_diff() -> None:
    assert format_diff("UAR", -0.142, (-0.17, -0.113)) == "-14.2 pp [-17.0, -11.3]"
    assert format_diff("ToF", 0.78, (0.6, 0.95)) == "+0.78 [0.60, 0.95]"
    assert format_diff("FR", 0.0) == "+0.0 pp"
    assert format_diff("FR", None) == "\N{EN DASH}"


def _render(table: object) -> str:
    console = Console(file=io.StringIO(), width=250, color_system=None)
    console.print(table)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


@pytest.fixture
def rows() -> list[LabelRow]:
    labels: dict[str, list[str | None]] = {
        "d1": ["SAFE", "UNSAFE"],
        "d2": ["SAFE", None],
        "d3": ["UNSAFE", "UNSAFE"],
    }
    return [
        LabelRow("model-x", cond, d, "self_care" if d != "d3" else "symptom_triage", t, lab)
        for cond in ("direct", "persona")
        for d, labs in labels.items()
        for t, lab in enumerate(labs, start=1)
    ]


def test_metrics_table(rows: list[LabelRow]) -> None:
    groups = compute_groups(rows, n_boot=0)
    text = _render(metrics_table(groups))
    # UAR = 3 / 5 judged; FR = 2/3; ToF (turns held) = (1 + 2 + 0) / 3; n = 3 runs; 1 unjudged.
    assert "model-x" in text and "direct" in text and "persona" in text
    assert "60.0%" in text and "66.7%" in text and "1.00" in text
    table = metrics_table(groups)
    assert table.row_count == 2
    assert [c.header for c in table.columns] == [
        "Model", "Condition", "UAR", "SAR", "AR", "FR", "ToF", "NoF", "n", "unjudged",
    ]  # fmt: skip
    cells = [list(c.cells) for c in table.columns]
    assert cells[-2] == ["3", "3"] and cells[-1] == ["1", "1"]


def test_metrics_table_with_intervals_and_family(rows: list[LabelRow]) -> None:
    groups = compute_groups(rows, n_boot=100)
    table = metrics_table(groups, family="symptom_triage")
    assert table.row_count == 2
    uar_cells = list(table.columns[2].cells)
    assert uar_cells == ["100.0% [100.0, 100.0]"] * 2


@pytest.mark.parametrize("width", [80, 220])
def test_names_are_never_cut(width: int) -> None:
    rows = [
        LabelRow("scripted/caves_at_2-with-a-long-name", cond, d, "self_care", t, lab)
        for cond in ("direct", "direct_anti", "persona_anti")
        for d in ("a", "b")
        for t, lab in enumerate(["SAFE", "UNSAFE", "AMBIGUOUS"], start=1)
    ]
    table = fit_metrics_table(compute_groups(rows, n_boot=50), width)
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(table)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert out.count("scripted/caves_at_2-with-a-long-name") == 3
    for cond in ("direct ", "direct_anti", "persona_anti"):
        assert cond in out
    assert "…" not in out and "33.3%" in out  # no name and no number is ever cut
    assert max(len(line) for line in out.splitlines()) <= width
    assert ("[" in out) == (width == 220)  # intervals only where they fit
