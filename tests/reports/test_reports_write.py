"""write_report end to end on synthetic labels."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread

from medpress.metrics import (
    DEFAULT_PAIRS,
    FAILURE_MODES,
    LabelRow,
    all_paired_differences,
    compute_groups,
)
from medpress.metrics.registry import paired_suite_differences
from medpress.reports import write_report
from medpress.reports.suite import medpress_registry_specs

CONDITIONS = ("direct", "persona", "direct_anti", "persona_anti")
FAMILIES = ("medication_treatment", "self_care", "symptom_triage")
PNGS = ("uar_by_turn.png", "survival.png", "family_bars.png", "failure_modes.png")
CSVS = ("groups.csv", "uar_by_turn.csv", "failure_modes.csv", "paired.csv")
PROVENANCE: list[dict[str, Any]] = [
    {
        "run_id": "run-alpha",
        "dataset": {"version": "1.0.0", "sha256": "deadbeef"},
        "conditions_version": "2024-06",
        "model": {"name": "model-a", "provider": "local"},
        "parameters": {"temperature": 0.0, "thinking": False},
    },
    {"model": "model-b", "dataset_version": "1.0.0", "seed": 3},
]


def synthetic(models: tuple[str, ...] = ("model-a", "model-b"), turns: int = 5,
              n_dialogues: int = 12, seed: int = 0) -> list[LabelRow]:  # fmt: skip
    rng = np.random.default_rng(seed)
    rows = []
    for m, model in enumerate(models):
        for c, cond in enumerate(CONDITIONS):
            for d in range(n_dialogues):
                for t in range(1, turns + 1):
                    p = min(0.9, 0.1 + 0.15 * t - 0.05 * c + 0.05 * m)
                    u = rng.random()
                    label: str | None = (
                        "UNSAFE" if u < p else "AMBIGUOUS" if u < p + 0.15 else "SAFE"
                    )
                    if rng.random() < 0.03:
                        label = None
                    mode = (FAILURE_MODES[int(rng.integers(len(FAILURE_MODES)))]
                            if label in ("UNSAFE", "AMBIGUOUS") else None)  # fmt: skip
                    rows.append(LabelRow(model, cond, f"D{d:03d}", FAMILIES[d % 3], t, label,
                                         mode))  # fmt: skip
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[LabelRow]]:
    rows = synthetic()
    out = tmp_path_factory.mktemp("report") / "nested" / "out"
    path = write_report(out, rows, PROVENANCE, judge="qwen3-32b (temperature 0)",
                        label_note="Labels are synthetic.", n_boot=200, seed=1)  # fmt: skip
    assert path == out / "report.md"
    return out, rows


def test_writes_every_file(report: tuple[Path, list[LabelRow]]) -> None:
    out, _ = report
    for name in ("report.md", "metrics.json", *CSVS, *PNGS, "heatmap.png"):
        assert (out / name).is_file(), name
        assert (out / name).stat().st_size > 0, name


@pytest.mark.parametrize("name", [*PNGS, "heatmap.png"])
def test_pngs_are_not_blank(report: tuple[Path, list[LabelRow]], name: str) -> None:
    image = imread(report[0] / name)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
    assert float(np.var(image[..., :3])) > 0


def test_metrics_json_matches_compute_groups(report: tuple[Path, list[LabelRow]]) -> None:
    out, rows = report
    data = json.loads((out / "metrics.json").read_text())
    assert data["judge"] == "qwen3-32b (temperature 0)"
    assert data["label_note"] == "Labels are synthetic."
    assert data["provenance"] == PROVENANCE
    expected = [g.to_dict() for g in compute_groups(rows, n_boot=200, seed=1)]
    assert data["groups"] == expected
    assert len(expected) == 2 * 4 * (3 + 1)
    paired = [p.to_dict() for p in all_paired_differences(rows, n_boot=200, seed=1)]
    # then the knowledge-robustness gap's paired differences, one per model x pair
    gap = [p.to_dict() for p in paired_suite_differences(
        rows, DEFAULT_PAIRS, medpress_registry_specs("knowledge_gap"), n_boot=200, seed=1)]
    assert data["paired"] == paired + gap and len(paired) == 2 * 4 * 3 and len(gap) == 2 * 4


def test_csvs(report: tuple[Path, list[LabelRow]]) -> None:
    out, rows = report
    groups = compute_groups(rows, n_boot=200, seed=1)

    def read(name: str) -> list[dict[str, str]]:
        with (out / name).open(newline="") as fh:
            return list(csv.DictReader(fh))

    g_rows = read("groups.csv")
    assert len(g_rows) == len(groups)
    first = g_rows[0]
    assert (first["model"], first["condition"], first["family"]) == (
        groups[0].model, groups[0].condition, groups[0].family)  # fmt: skip
    assert float(first["UAR"]) == groups[0].UAR
    assert [float(first["UAR_lo"]), float(first["UAR_hi"])] == groups[0].ci["UAR"]
    assert int(first["unjudged"]) == groups[0].unjudged
    assert len(read("uar_by_turn.csv")) == 5 * len(groups)
    modes = read("failure_modes.csv")
    assert len(modes) == len(FAILURE_MODES) * len(groups)
    assert sum(int(r["count"]) for r in modes if r["family"] == "all") == sum(
        r.label in ("UNSAFE", "AMBIGUOUS") for r in rows)  # fmt: skip
    assert len(read("paired.csv")) == 24 + 8  # UAR, FR, ToF; the gap


def test_report_markdown(report: tuple[Path, list[LabelRow]]) -> None:
    out, rows = report
    text = (out / "report.md").read_text()
    assert text.index("Labels are synthetic.") < text.index("## Provenance")
    assert "qwen3-32b (temperature 0)" in text
    unjudged = sum(r.label is None for r in rows)
    assert f"**Unjudged:** {unjudged} of {len(rows)}" in text
    for needle in ("### Run 1: run-alpha", "**dataset.sha256:** `deadbeef`",
                   "**conditions_version:** `2024-06`", "**parameters.thinking:** `false`",
                   "### Run 2: model-b", "**seed:** `3`"):  # fmt: skip
        assert needle in text, needle
    for section in ("## Headline", "## Leaderboard", "## By family", "## UAR by turn",
                    "## Failure modes", "## Paired condition effects"):  # fmt: skip
        assert section in text, section
    for png in (*PNGS, "heatmap.png"):
        assert f"]({png})" in text, png
    g = next(g for g in compute_groups(rows, n_boot=200, seed=1) if g.family == "all")
    interval = g.interval("UAR")
    assert g.UAR is not None and interval is not None
    lo, hi = interval
    assert f"| {g.model} | {g.condition} | {100 * g.UAR:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]" \
        in text  # fmt: skip
    assert "direct → direct_anti" in text


def test_leaderboard_sorted_by_net_safe_stance(report: tuple[Path, list[LabelRow]]) -> None:
    text = (report[0] / "report.md").read_text()
    section = text.split("## Leaderboard", 1)[1].split("## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert len(lines) == 8
    nets = [float(ln.split("|")[4].strip().split(" pp")[0]) for ln in lines]
    assert nets == sorted(nets, reverse=True)


def test_a_model_that_never_takes_a_stance_cannot_rank_first(tmp_path: Path) -> None:
    def run(model: str, labels: list[str]) -> list[LabelRow]:
        return [LabelRow(model, "direct", f"d{i}", "self_care", t, lab)
                for i in range(4) for t, lab in enumerate(labels, start=1)]

    rows = (run("scripted/hedger", ["AMBIGUOUS"] * 5)
            + run("holds-mostly", ["SAFE", "SAFE", "SAFE", "SAFE", "UNSAFE"]))
    write_report(tmp_path, rows, [], judge="j", n_boot=20)
    section = (tmp_path / "report.md").read_text().split("## Leaderboard", 1)[1]
    first = next(ln for ln in section.splitlines() if ln.startswith("| 1 |"))
    assert "holds-mostly" in first  # UAR 20% but SAR 80%; the hedger's UAR 0% ranks second


def test_single_model_three_turns(tmp_path: Path) -> None:
    rows = synthetic(models=("solo",), turns=3, n_dialogues=6)
    write_report(tmp_path, rows, [], judge="j", n_boot=50)
    assert not (tmp_path / "heatmap.png").exists()
    text = (tmp_path / "report.md").read_text()
    assert "## Leaderboard" not in text and "heatmap.png" not in text
    assert "_No run provenance was given._" in text
    assert "Note on labels" not in text
    assert "| Turn 3 |" in text and "Turn 4" not in text
    for png in PNGS:
        assert float(np.var(imread(tmp_path / png)[..., :3])) > 0


def test_markdown_cells_are_escaped(tmp_path: Path) -> None:
    rows = [LabelRow("a|b", "direct", "d", "f", 1, "SAFE")]
    write_report(tmp_path, rows, [{"note": "line one\nline two"}], judge="j", n_boot=10)
    text = (tmp_path / "report.md").read_text()
    assert "| a\\|b | direct |" in text
    assert "`line one line two`" in text


def test_empty_rows_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no label rows"):
        write_report(tmp_path, [], [], judge="j")


def test_reused_out_dir_keeps_no_stale_files(tmp_path: Path) -> None:
    write_report(tmp_path, synthetic(), [], judge="j", n_boot=20)
    assert (tmp_path / "heatmap.png").exists()
    (tmp_path / "notes.txt").write_text("mine")
    rows = [LabelRow("solo", "direct", f"d{i}", "self_care", t, "SAFE")
            for i in range(3) for t in (1, 2)]
    write_report(tmp_path, rows, [], judge="j", n_boot=20)
    assert not (tmp_path / "heatmap.png").exists()  # from the earlier two-model report
    assert not (tmp_path / "failure_modes.png").exists()  # no failure modes: no empty chart
    assert "No reply carries a failure mode" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "notes.txt").read_text() == "mine"  # the user's own file stays
