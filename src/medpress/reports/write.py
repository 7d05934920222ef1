"""Write a self-contained report folder: report.md, metrics.json, CSVs and PNG figures, and
optionally report.html (`medpress.reports.html`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from medpress.metrics import (
    DEFAULT_PAIRS,
    GroupMetrics,
    LabelRow,
    PairedDiff,
    all_paired_differences,
    compute_groups,
    format_metric,
)
from medpress.metrics.corrected import CorrectedGroup
from medpress.metrics.registry import paired_suite_differences

from .csvs import (
    write_failure_modes_csv,
    write_groups_csv,
    write_paired_csv,
    write_uar_by_turn_csv,
)
from .plots import (
    plot_failure_modes,
    plot_family_bars,
    plot_heatmap,
    plot_survival,
    plot_uar_by_turn,
)
from .tables import (
    LEADERBOARD_RULE,
    corrected_table,
    failure_mode_table,
    family_table,
    first_flip_table,
    headline_table,
    leaderboard_table,
    paired_table,
    survival_table,
    tof_table,
    uar_by_turn_table,
)

if TYPE_CHECKING:
    from .html_data import RunTranscripts

__all__ = ["write_report"]

_TEMPLATES = Path(__file__).with_name("templates")
_TITLE_KEYS = ("run_id", "run", "name", "model")
_LEVEL = 0.95
AXIS_NOTE = ("No reply carries a helpfulness tag: these labels come from a judge that gives none "
             "(imported labels, an embedded judge trained before the tag, or a rubric before "
             "1.1.0), so SHR is not reported; judge again with the embedded judge or an LLM "
             "judge for the second axis.")
REPORT_FILES: tuple[str, ...] = (
    "report.md", "metrics.json", "groups.csv", "uar_by_turn.csv", "failure_modes.csv",
    "paired.csv", "uar_by_turn.png", "survival.png", "family_bars.png", "failure_modes.png",
    "heatmap.png", "report.html",
)
"""Every file a report may write; a report removes those of an earlier report in its folder."""


def write_report(
    out_dir: Path,
    rows: Sequence[LabelRow],
    provenance: Sequence[Mapping[str, Any]],
    *,
    judge: str,
    label_note: str | None = None,
    notes: Sequence[str] = (),
    n_boot: int = 1000,
    seed: int = 0,
    corrected: Sequence[CorrectedGroup] = (),
    corrected_note: str | None = None,
    html: bool = False,
    transcripts: Sequence[RunTranscripts] = (),
) -> Path:
    """Compute every metric for ``rows`` and write the report folder ``out_dir``.

    ``corrected`` (from :func:`medpress.metrics.corrected.corrected_groups`) adds a section
    with the figures corrected for the judge's errors, ``corrected_note`` saying which gold
    sample they rest on, and each group's corrected keys in metrics.json.

    Writes report.md, metrics.json (``judge``, ``label_note``, ``provenance``, ``groups``,
    ``paired``), groups.csv, uar_by_turn.csv, failure_modes.csv, paired.csv, and the figures
    uar_by_turn.png, survival.png, family_bars.png, failure_modes.png (only when some reply
    carries a failure mode; the report says so otherwise), plus heatmap.png when there is more
    than one model (the leaderboard likewise). ``provenance`` holds one mapping
    per run; every key is listed as given (nested mappings as dotted keys), so it must be
    JSON-serialisable or convertible with ``str``. ``notes`` are warnings shown at the top
    (and above the leaderboard), e.g. runs labelled by different judges. Files of an earlier
    report in ``out_dir`` (`REPORT_FILES`) are removed first, so none is left stale; other
    files are kept. ``out_dir`` is created if needed.

    ``html`` also writes report.html (`medpress.reports.html.write_html_report`): the same
    results with interactive charts, and a browser of the transcripts of ``transcripts`` (one
    entry per reported run; without them the page holds the results alone).

    Returns:
        The path of report.md.

    Raises:
        ValueError: ``rows`` is empty, or as `compute_groups` does.
    """
    if not rows:
        raise ValueError("no label rows to report on")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = compute_groups(rows, n_boot=n_boot, seed=seed, level=_LEVEL)
    for name in REPORT_FILES:
        (out_dir / name).unlink(missing_ok=True)
    paired = all_paired_differences(rows, report_pairs(provenance), n_boot=n_boot, seed=seed,
                                    level=_LEVEL)
    paired += variant_effects(rows, provenance, n_boot=n_boot, seed=seed)
    from .suite import (  # it imports this module
        adaptive_table,
        axis_groups,
        axis_table,
        medpress_registry_specs,
    )

    paired += paired_suite_differences(rows, report_pairs(provenance),
                                       medpress_registry_specs("knowledge_gap"), n_boot=n_boot,
                                       seed=seed, level=_LEVEL)
    several_models = len({g.model for g in groups}) > 1
    any_modes = any(sum(g.failure_modes.values()) for g in groups)

    axis = axis_groups(rows, n_boot=n_boot, seed=seed)
    tof = {(g.model, g.condition): format_metric("ToF", g.ToF, g.interval("ToF"))
           for g in groups if g.family == "all"}
    adaptive, adaptive_groups, attack_lines = adaptive_table(rows, provenance, tof,
                                                             n_boot=n_boot, seed=seed)
    extra = {(c.model, c.condition, c.family): c.to_dict() for c in corrected}
    _write_json(out_dir / "metrics.json", judge, label_note, notes, provenance, groups, paired,
                extra, corrected_note, axis, adaptive_groups)
    write_groups_csv(groups, out_dir / "groups.csv")
    write_uar_by_turn_csv(groups, out_dir / "uar_by_turn.csv")
    write_failure_modes_csv(groups, out_dir / "failure_modes.csv")
    write_paired_csv(paired, out_dir / "paired.csv")

    figures: dict[str, str | None] = {
        "uar_by_turn": plot_uar_by_turn(groups, out_dir / "uar_by_turn.png").name,
        "survival": plot_survival(groups, out_dir / "survival.png").name,
        "family_bars": plot_family_bars(groups, out_dir / "family_bars.png").name,
        "failure_modes": (
            plot_failure_modes(groups, out_dir / "failure_modes.png").name if any_modes else None
        ),
        "heatmap": plot_heatmap(groups, out_dir / "heatmap.png").name if several_models else None,
    }

    pooled = [g for g in groups if g.family == "all"]
    unjudged = sum(g.unjudged for g in pooled)
    n_turns = sum(g.n_turns_judged for g in pooled) + unjudged
    summary = {
        "n_labels": len(rows),
        "n_turns": n_turns,
        "not_generated": sum(g.not_generated for g in pooled),
        "n_models": len({r.model for r in rows}),
        "n_conditions": len({r.condition for r in rows}),
        "n_dialogue_ids": len({r.dialogue_id for r in rows}),
        "n_runs": len({(r.model, r.condition, r.dialogue_id, r.repeat) for r in rows}),
        "unjudged": unjudged,
        "unjudged_share": f"{100 * unjudged / n_turns:.1f}%",
        "level": f"{100 * _LEVEL:.0f}%",
        "n_boot": n_boot,
        "seed": seed,
    }
    text = (
        _environment()
        .get_template("report.md.j2")
        .render(
            judge=_one_line(judge),
            label_note=None if label_note is None else _one_line(label_note),
            notes=[_one_line(n) for n in notes],
            summary=summary,
            provenance=[_provenance_block(i, p) for i, p in enumerate(provenance, start=1)],
            headline=headline_table(groups),
            axis=axis_table(axis) if axis else None,
            adaptive=adaptive,
            attack_lines=[_one_line(x) for x in attack_lines],
            axis_note=None if axis else AXIS_NOTE,
            corrected=corrected_table(corrected) if corrected else None,
            corrected_note=corrected_note,
            leaderboard=leaderboard_table(groups) if several_models else None,
            leaderboard_rule=LEADERBOARD_RULE,
            by_family=family_table(groups),
            by_turn=uar_by_turn_table(groups),
            tof=tof_table(groups),
            survival=survival_table(groups),
            first_flip=first_flip_table(groups),
            failure_modes=failure_mode_table(groups),
            paired=paired_table(paired),
            figures=figures,
        )
    )
    report = out_dir / "report.md"
    report.write_text(text, encoding="utf-8")
    if html:
        from .html import write_html_report  # jinja's HTML env and the judges: only when asked

        write_html_report(out_dir, groups, paired, transcripts=transcripts, judge=judge,
                          summary=summary, provenance=provenance, label_note=label_note,
                          notes=notes, corrected=corrected, corrected_note=corrected_note)
    return report


def report_pairs(provenance: Sequence[Mapping[str, Any]],
                 base: Sequence[tuple[str, str]] = DEFAULT_PAIRS) -> list[tuple[str, str]]:
    """The condition pairs whose paired differences a report shows: ``base`` (MedPRESS's
    defaults, or a suite's ``conditions.pairs``), then each defence against the base its runs
    recorded (``conditions.bases``), in first-seen order."""
    pairs = [tuple(p) for p in base]
    for p in provenance:
        for defence, base_name in _at(p, "conditions", "bases").items():
            if (base_of := str(base_name)) and (base_of, defence) not in pairs:
                pairs.append((base_of, defence))
    return [(a, b) for a, b in pairs]


def _at(p: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """The mapping under ``keys`` in a provenance mapping; empty where a level is missing or
    not a mapping (provenance is free-form JSON for reports)."""
    node: Any = p
    for k in keys:
        node = node.get(k) if isinstance(node, Mapping) else None
    return dict(node) if isinstance(node, Mapping) else {}


def _variant(p: Mapping[str, Any]) -> dict[str, str]:
    """A run's settings, with the two that variant effects compare under their own names:
    ``reasoning`` (on/off, unset = off) and ``users`` (``fixed``, or ``adaptive <strategy>``
    with the attacker)."""
    gen = _at(p, "params", "generation")
    reasoning = str(gen.pop("reasoning", None) or "off")
    attack = _at(p, "params", "attack")
    users = "fixed" if not attack else f"adaptive {attack.get('strategy')}"
    rest = json.dumps([_at(p, "model").get("spec"), gen], sort_keys=True, default=str)
    return {"reasoning": reasoning, "users": users, "rest": rest}


def variant_effects(rows: Sequence[LabelRow], provenance: Sequence[Mapping[str, Any]], *,
                    n_boot: int = 1000, seed: int = 0) -> list[PairedDiff]:
    """Effects between runs of one model that differ in one setting only, paired by dialogue
    and condition: reasoning on against off (``<condition> · reasoning off`` → ``… on``), and
    adaptive against fixed user turns (``<condition> · fixed`` → ``… · adaptive escalate``).
    Reported under the model spec; none when no such pair of runs exists."""
    out: list[PairedDiff] = []
    settings = [_variant(p) for p in provenance]
    for i, (pa, va) in enumerate(zip(provenance, settings, strict=True)):
        for pb, vb in zip(provenance[i + 1:], settings[i + 1:], strict=True):
            if va["rest"] != vb["rest"]:
                continue
            differ = [k for k in ("reasoning", "users") if va[k] != vb[k]]
            if len(differ) != 1:
                continue
            (field,) = differ
            # off before on, fixed before adaptive
            (a, sa), (b, sb) = sorted([(pa, va[field]), (pb, vb[field])],
                                      key=lambda x: x[1] not in ("off", "fixed"))
            tag = "reasoning " if field == "reasoning" else ""
            spec = str(_at(a, "model").get("spec"))
            sub = [replace(r, model=spec, condition=f"{r.condition} · {tag}{label}")
                   for run, label in ((a, sa), (b, sb)) for r in rows
                   if r.model == str(run.get("name"))]
            conds = sorted({r.condition for r in rows if r.model == str(a.get("name"))})
            out += all_paired_differences(
                sub, [(f"{c} · {tag}{sa}", f"{c} · {tag}{sb}") for c in conds],
                n_boot=n_boot, seed=seed, level=_LEVEL)
    return out


def _environment() -> jinja2.Environment:
    # Markdown, not HTML: autoescape would mangle it; cells are escaped by the "cell" filter.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = _cell
    return env


def _cell(value: object) -> str:
    """A markdown table cell: pipes escaped, kept on one line."""
    return _one_line(str(value)).replace("|", "\\|")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _write_json(
    path: Path,
    judge: str,
    label_note: str | None,
    notes: Sequence[str],
    provenance: Sequence[Mapping[str, Any]],
    groups: Sequence[GroupMetrics],
    paired: Sequence[PairedDiff],
    corrected: Mapping[tuple[str, str, str], dict[str, Any]],
    corrected_note: str | None,
    axis: Sequence[Any] = (),
    adaptive: Sequence[Any] = (),
) -> None:
    payload = {
        "judge": judge,
        "label_note": label_note,
        "notes": list(notes),
        "provenance": [dict(p) for p in provenance],
        "groups": [g.to_dict() | corrected.get((g.model, g.condition, g.family), {})
                   for g in groups],
        "paired": [p.to_dict() for p in paired],
    }
    if corrected_note:
        payload["gold"] = corrected_note
    if axis:
        payload["axis"] = [g.to_dict() for g in axis]
    if adaptive:
        payload["adaptive"] = [g.to_dict() for g in adaptive]
    # default=str: provenance may carry paths or datetimes; metrics never produce NaN.
    path.write_text(
        json.dumps(payload, indent=2, default=str, allow_nan=False) + "\n", encoding="utf-8"
    )


def _flatten(mapping: Mapping[str, Any], prefix: str = "",
             render: Callable[[Any], str] | None = None) -> list[tuple[str, str]]:
    """(dotted key, rendered value) of a nested mapping; values as inline code by default."""
    render = render or _code
    items: list[tuple[str, str]] = []
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            items.extend(_flatten(value, f"{name}.", render) if value
                         else [(name, render({}))])
        else:
            items.append((name, render(value)))
    return items


def _code(value: Any) -> str:
    """A provenance value as inline code (hashes, paths, specs read literally)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = _one_line(text)
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def _provenance_block(index: int, run: Mapping[str, Any],
                      render: Callable[[Any], str] | None = None) -> dict[str, Any]:
    title = f"Run {index}"
    for key in _TITLE_KEYS:
        value = run.get(key)
        if isinstance(value, str) and value:
            title += f": {_one_line(value)}"
            break
    return {"title": title, "items": _flatten(run, render=render)}
