"""The report of a suite other than MedPRESS: header, headline metrics, label rates by turn.

MedPRESS's own report (:func:`medpress.reports.write_report`) is untouched; this one reads a
suite's metrics (:func:`medpress.metrics.registry.compute_suite_groups`) and formats them
with the same helpers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medpress.metrics import LabelRow, format_diff, format_metric, format_value
from medpress.metrics.registry import SuiteGroup, compute_suite_groups, label_rates_by_turn
from medpress.reports.html_data import RunTranscripts
from medpress.reports.tables import TableData
from medpress.reports.write import _cell, report_pairs
from medpress.suites import Suite

__all__ = ["axis_groups", "axis_table", "label_turn_table", "suite_alerts", "suite_cell",
           "suite_headline_table", "write_suite_report"]

# A metric name format_metric shows as a rate, and one it shows as a number.
_AS = {"rate": "UAR", "turn": "ToF"}


def suite_cell(g: SuiteGroup, name: str) -> str:
    """``58.2% [54.1, 62.0]`` for a rate, ``2.41 [2.30, 2.52]`` for a turn; a dash if undefined."""
    ci = g.ci.get(name)
    return format_metric(_AS[g.kinds[name]], g.values.get(name),
                         None if ci is None else (ci[0], ci[1]))


def suite_headline_table(groups: Sequence[SuiteGroup], headline: Sequence[str],
                         stratum: str | None = "all") -> TableData:
    """One row per model x condition (x stratum when ``stratum`` is None)."""
    chosen = [g for g in groups if stratum is None or g.stratum == stratum]
    extra = ["stratum"] if stratum is None else []
    return TableData(["model", "condition", *extra, "dialogues", *headline],
                     [[g.model, g.condition, *([g.stratum] if stratum is None else []),
                       str(g.n_dialogues), *(suite_cell(g, h) for h in headline)]
                      for g in chosen])


def axis_groups(rows: Sequence[LabelRow], *, n_boot: int = 1000, seed: int = 0
                ) -> list[SuiteGroup]:
    """MedPRESS's second axis: its manifest's registry metrics (SHR, unhelpful_rate,
    conviction_at, the knowledge-robustness gap), pooled over families; empty when no row
    carries a tag."""
    if not any(r.tags for r in rows):
        return []
    return [g for g in compute_suite_groups(rows, medpress_registry_specs(), n_boot=n_boot,
                                            seed=seed) if g.stratum == "all"]


def adaptive_table(rows: Sequence[LabelRow], provenance: Sequence[Mapping[str, Any]],
                   tof: Mapping[tuple[str, str], Any], *, n_boot: int = 1000,
                   seed: int = 0) -> tuple[TableData | None, list[SuiteGroup], list[str]]:
    """The report's adaptive-pressure section when any run's user turns were an attacker's:
    CSR and Δ sycophancy (the medpress manifest's ``ever_label``/``turn_delta``) with ToF
    (``tof``: (model, condition) -> formatted) per model x condition, the groups, and one
    line per adaptive run (attacker, strategy, drift flags, fallbacks). (None, [], []) when
    no run is adaptive."""
    attacked = [p for p in provenance if (p.get("params") or {}).get("attack")]
    if not attacked:
        return None, [], []
    users = {str(p.get("name")): (f"adaptive {p['params']['attack'].get('strategy')}"
                                  if (p.get("params") or {}).get("attack") else "fixed")
             for p in provenance}
    specs = medpress_registry_specs("ever_label") + medpress_registry_specs("turn_delta")
    groups = [g for g in compute_suite_groups(rows, specs, n_boot=n_boot, seed=seed)
              if g.stratum == "all"]
    table = TableData(["model", "condition", "user turns", "CSR", "Δ sycophancy", "ToF"],
                      [[g.model, g.condition, users.get(g.model, "?"), suite_cell(g, "CSR"),
                        suite_cell(g, "delta"), str(tof.get((g.model, g.condition), "–"))]
                       for g in groups])
    lines = []
    for p in attacked:
        a, summ = p["params"]["attack"], p.get("attack_summary") or {}
        flags = ", ".join(f"{k} {v}" for k, v in sorted((summ.get("flagged") or {}).items()))
        lines.append(f"{p.get('name')}: attacker {a.get('spec')}, strategy {a.get('strategy')}, "
                     f"prompts {a.get('prompts_version')}, seed {a.get('seed')}, "
                     f"{a.get('max_turns') or 'scripted'} turns per dialogue; "
                     f"{summ.get('turns', 0)} attacker turns, "
                     f"{summ.get('fallbacks', 0)} fell back to the scripted turn; attempts "
                     f"not sent for drift: {flags or 'none'}")
    return table, groups, lines


def medpress_registry_specs(use: str | None = None) -> list[Any]:
    """The medpress manifest's metric specs that the registry computes (all, or one kind)."""
    from medpress.metrics.registry import REGISTRY
    from medpress.suites import resolve_suite

    return [m for m in resolve_suite("medpress").manifest.metrics
            if m.use in REGISTRY and use in (None, m.use)]


def axis_table(groups: Sequence[SuiteGroup]) -> TableData:
    """SHR, unhelpful and the knowledge-robustness gap with intervals, and conviction at each
    turn (points)."""
    width = max((len(g.values.get("conviction_at") or []) for g in groups), default=0)
    return TableData(
        ["model", "condition", "SHR", "unhelpful", "gap", *(f"conviction@{t}"
                                                            for t in range(1, width + 1))],
        [[g.model, g.condition, suite_cell(g, "SHR"), suite_cell(g, "unhelpful_rate"),
          suite_cell(g, "gap"),
          *(format_value("UAR", x) for x in g.values.get("conviction_at") or [])]
         for g in groups])


def _md(table: TableData) -> str:
    head = "| " + " | ".join(map(_cell, table.headers)) + " |"
    rule = "|" + "---|" * len(table.headers)
    body = ["| " + " | ".join(map(_cell, row)) + " |" for row in table.rows]
    return "\n".join([head, rule, *body])


def label_turn_table(rows: Sequence[LabelRow], labels: Sequence[str]) -> TableData:
    """Each label's share of judged replies at each turn, per model x condition."""
    by_turn = label_rates_by_turn(rows, labels)
    width = max((len(v) for d in by_turn.values() for v in d.values()), default=0)
    return TableData(["model", "condition", "label", *(f"t{t}" for t in range(1, width + 1))],
                     [[model, cond, lab, *(format_value("UAR", x) for x in rates)]
                      for (model, cond), per in sorted(by_turn.items())
                      for lab, rates in per.items()])


def suite_alerts(suite: Suite, groups: Sequence[SuiteGroup]) -> list[str]:
    """The manifest's ``alerts`` that hold for a pooled group: every named metric defined and
    below its bound; one line per (group, alert)."""
    out = []
    for g in groups:
        if g.stratum != "all":
            continue
        for a in suite.manifest.alerts:
            vals = [g.values.get(k) for k in a.below]
            if all(isinstance(v, float) and v < bound
                   for v, bound in zip(vals, a.below.values(), strict=True)):
                out.append(f"{g.model} · {g.condition}: {' '.join(a.say.split())}")
    return out


def write_suite_report(out_dir: Path, suite: Suite, identity: Mapping[str, Any],
                       rows: Sequence[LabelRow], provenance: Sequence[Mapping[str, Any]], *,
                       judge: str, labels: Sequence[str], notes: Sequence[str] = (),
                       n_boot: int = 1000, seed: int = 0, html: bool = False,
                       modes: Sequence[str] = (),
                       transcripts: Sequence[RunTranscripts] = ()) -> Path:
    """Write report.md and metrics.json for a suite run; returns the report.md path.

    ``identity`` is the suite identity the run recorded; ``labels`` the rubric's labels (most
    severe first), whose rates by turn the report shows. ``html`` adds report.html: the same
    tables and a browser of ``transcripts`` over ``labels`` and the rubric's failure ``modes``.
    """
    from medpress.metrics.registry import REGISTRY, paired_suite_differences
    from medpress.suites import record_index

    m = suite.manifest
    groups = compute_suite_groups(rows, m.metrics, n_boot=n_boot, seed=seed,
                                  records=record_index(suite))
    alerts = suite_alerts(suite, groups)
    out_dir.mkdir(parents=True, exist_ok=True)
    intervals = f"95% percentile bootstrap over dialogues, {n_boot} resamples, seed {seed}"
    # variant metrics compare records within a run, not conditions: not paired here
    scalar = [x for x in m.metrics if x.as_ in m.headline and not REGISTRY[x.use].per_turn
              and not REGISTRY[x.use].variants]
    paired = paired_suite_differences(rows, report_pairs(provenance, m.conditions.pairs),
                                      scalar, n_boot=n_boot, seed=seed)
    kinds = {k: v for g in groups for k, v in g.kinds.items()}
    tables = {"paired": TableData(
        ["model", "A → B", "metric", "n matched", "A", "B", "B - A [95% CI]"],
        [[p.model, f"{p.cond_a} → {p.cond_b}", p.metric, str(p.n_dialogues),
          format_value(_AS[kinds[p.metric]], p.value_a),
          format_value(_AS[kinds[p.metric]], p.value_b),
          format_diff(_AS[kinds[p.metric]], p.diff,
                      None if p.lo is None or p.hi is None else (p.lo, p.hi))]
         for p in paired]),
              "headline": suite_headline_table(groups, m.headline),
              "by_stratum": suite_headline_table([g for g in groups if g.stratum != "all"],
                                                 m.headline, None),
              "by_turn": label_turn_table(rows, labels)}
    lines = [f"# {m.name} {m.version}", "", m.question.strip(), "",
             f"- suite hash: `{identity.get('hash')}` (scheme {identity.get('hash_scheme')})",
             f"- labels: {judge}", f"- intervals: {intervals}", ""]
    lines += [f"> warning: {n}" for n in notes]
    lines += [f"> alert: {a}" for a in alerts]
    lines += ["", "## Headline", "", _md(tables["headline"]), "",
              f"## By {m.records.stratum}", "", _md(tables["by_stratum"]), "",
              "## Label rates by turn", "", _md(tables["by_turn"]), ""]
    dynamic = [x.as_ for x in m.metrics if "*" in REGISTRY[x.use].kinds]
    split = TableData(["model", "condition", "metric", "value", "rate"],
                      [[g.model, g.condition, name, key[len(name) + 1:], suite_cell(g, key)]
                       for g in groups if g.stratum == "all" for name in dynamic
                       for key in g.values if key.startswith(f"{name}_")])
    if split.rows:
        lines += ["## By record field", "", "Rates per value of a record field (e.g. the "
                  "attack surface).", "", _md(split), ""]
    if paired:
        lines += ["## Paired effects", "", "Each condition pair of the manifest, and each "
                  "defence against its base: B - A over the dialogues run in both, with an "
                  "interval from resampling them jointly.", "", _md(tables["paired"]), ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    (out_dir / "metrics.json").write_text(json.dumps(
        {"suite": dict(identity), "judge": judge, "notes": list(notes), "alerts": alerts,
         "provenance": [dict(p) for p in provenance],
         "groups": [g.to_dict() for g in groups], "paired": [p.to_dict() for p in paired]},
        indent=1, default=str), encoding="utf-8")
    if html:
        from medpress.reports.html import write_suite_html_report

        page = {"name": m.name, "version": m.version, "question": m.question.strip(),
                "hash": identity.get("hash"), "hash_scheme": identity.get("hash_scheme"),
                "stratum": m.records.stratum, "headline": ", ".join(m.headline),
                "intervals": intervals}
        write_suite_html_report(out_dir, page, groups, tables, transcripts=transcripts,
                                judge=judge, labels=labels, modes=modes,
                                provenance=provenance,
                                notes=[*notes, *(f"alert: {a}" for a in alerts)])
    return path
