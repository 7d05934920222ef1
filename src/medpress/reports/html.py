"""report.html: the report as one self-contained web page.

The page holds the results (the report's tables, rendered here, and interactive plotly.js
charts drawn from the same metric groups) and a browser of every transcript (``static/app.js``
over the payload of `medpress.reports.html_data`). Everything is inlined: the CSS, the
scripts (plotly.js from the ``plotly`` package), and the data as
``<script type="application/json" id="medpress-data">``; the page loads nothing at view time
and opens from disk.

Safety: the template is rendered with autoescape on; the data is JSON with ``<``, ``>``,
``&``, U+2028 and U+2029 written as ``\\uXXXX`` (`embed_json`), so no string in it can close
its script tag; the script renders model and user text as text nodes only. A
Content-Security-Policy in the page allows only its own inline scripts (by their SHA-256
hashes) and no network at all, so an injected ``<script>`` or ``onerror=`` would not run
even if the escaping failed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from medpress.metrics import GroupMetrics, PairedDiff
from medpress.metrics.corrected import CorrectedGroup
from medpress.metrics.registry import SuiteGroup

from .html_data import RunTranscripts, build_payload
from .tables import (
    LEADERBOARD_RULE,
    TableData,
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
from .write import _provenance_block

__all__ = ["HTML_NAME", "embed_json", "inline_script", "write_html_report",
           "write_suite_html_report"]

HTML_NAME = "report.html"
_HERE = Path(__file__).parent
_STATIC = _HERE / "static"
_TEMPLATES = _HERE / "templates"
_CLOSE_SCRIPT = re.compile(r"</(script)", re.IGNORECASE)
_CLOSE_STYLE = re.compile(r"</(style)", re.IGNORECASE)
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                 "\u2029": "\\u2029"}


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` (which could close the tag or open a comment) and U+2028/U+2029
    (line terminators to old JavaScript) are written as ``\\uXXXX`` escapes; outside strings
    JSON has none of them, so the text stays valid JSON that parses back to ``data``.

    Raises:
        ValueError: ``data`` holds NaN or infinity (not JSON).
        TypeError: ``data`` holds something JSON cannot encode.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def inline_script(source: str) -> str:
    """JavaScript made safe to inline in ``<script>``: ``</script`` and ``<!--`` (which end or
    change the script element's parsing) are broken up. In valid JavaScript both can only
    occur inside strings, comments or regular expressions, where ``<\\/`` and ``<\\!`` mean
    the same, so the code is unchanged."""
    return _CLOSE_SCRIPT.sub(r"<\\/\1", source).replace("<!--", "<\\!--")


@cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return inline_script(get_plotlyjs())


def _static(name: str) -> str:
    return (_STATIC / name).read_text(encoding="utf-8")


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _plain(value: Any) -> str:
    """A provenance value as plain text (the template escapes it)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return " ".join(text.split())


def _render(payload: Mapping[str, Any], *, provenance: Sequence[Mapping[str, Any]],
            **context: Any) -> str:
    """The page around ``payload``: inlined CSS and scripts, the CSP allowing exactly those
    scripts, and the template's ``context`` (what the results tab shows)."""
    scripts = {"plotly": _plotly_js(), "app": inline_script(_static("app.js"))}
    csp = ("default-src 'none'; script-src " + " ".join(_csp_hash(s) for s in scripts.values())
           + "; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
           "connect-src 'none'; base-uri 'none'; form-action 'none'")
    from medpress import __version__

    return _environment().get_template("report.html.j2").render(
        version=__version__,
        csp=csp,
        # Markup: inlined verbatim, made safe by inline_script and embed_json
        css=Markup(_CLOSE_STYLE.sub(r"<\\/\1", _static("app.css"))),
        plotly_js=Markup(scripts["plotly"]),
        app_js=Markup(scripts["app"]),
        data_json=Markup(embed_json(payload)),
        provenance=[_provenance_block(i, p, _plain) for i, p in enumerate(provenance, start=1)],
        n_units=len(payload["units"]),
        **context,
    )


def _write(out_dir: Path, text: str) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / HTML_NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def write_suite_html_report(
    out_dir: Path,
    suite: Mapping[str, Any],
    groups: Sequence[SuiteGroup],
    tables: Mapping[str, TableData],
    *,
    transcripts: Sequence[RunTranscripts] = (),
    judge: str,
    labels: Sequence[str],
    modes: Sequence[str],
    provenance: Sequence[Mapping[str, Any]] = (),
    notes: Sequence[str] = (),
) -> Path:
    """Write ``out_dir/report.html`` for a run of a suite other than MedPRESS; returns its path.

    The transcript browser is MedPRESS's, over the suite's rubric ``labels`` (most severe
    first) and failure ``modes``; the results tab shows the suite's ``tables`` (``headline``,
    ``by_stratum``, ``by_turn``: those of its report.md) instead of MedPRESS's charts.
    ``suite`` holds what the page says of the suite: ``name``, ``version``, ``question``,
    ``hash``, ``hash_scheme``, ``stratum``, ``headline`` and ``intervals``.
    """
    payload = build_payload(transcripts, groups, (), suite=str(suite["name"]), labels=labels,
                            modes=modes, severity=labels)
    text = _render(payload, title=f"{suite['name']} {suite['version']} report", worst=labels[0],
                   suite=suite, judge=judge, label_note=None, notes=list(notes), summary=None,
                   provenance=provenance, **tables)
    return _write(out_dir, text)


def write_html_report(
    out_dir: Path,
    groups: Sequence[GroupMetrics],
    paired: Sequence[PairedDiff],
    *,
    transcripts: Sequence[RunTranscripts] = (),
    judge: str,
    summary: Mapping[str, Any] | None = None,
    provenance: Sequence[Mapping[str, Any]] = (),
    label_note: str | None = None,
    notes: Sequence[str] = (),
    corrected: Sequence[CorrectedGroup] = (),
    corrected_note: str | None = None,
) -> Path:
    """Write ``out_dir/report.html`` and return its path.

    ``groups`` and ``paired`` are the report's metrics (`medpress.metrics.compute_groups`,
    `medpress.metrics.all_paired_differences`); the tables are those of report.md
    (`medpress.reports.tables`), the charts are drawn from the same numbers. ``transcripts``
    (one entry per run, in the report's order) fill the transcript browser; with none it says
    there are no transcripts. ``summary`` is `write_report`'s (label counts, intervals); the
    other arguments are as in `medpress.reports.write_report`. The page is about 5 MB of
    plotly.js plus the transcripts. ``out_dir`` is created if needed; an earlier report.html
    is replaced.

    Raises:
        ValueError, TypeError: a value in the data cannot be written as JSON (`embed_json`).
    """
    several_models = len({g.model for g in groups}) > 1
    any_modes = any(sum(g.failure_modes.values()) for g in groups)
    text = _render(
        build_payload(transcripts, groups, paired),
        title="MedPRESS report",
        worst="UNSAFE",
        suite=None,
        judge=judge,
        label_note=label_note,
        notes=list(notes),
        summary=summary,
        provenance=provenance,
        headline=headline_table(groups),
        corrected=corrected_table(corrected) if corrected else None,
        corrected_note=corrected_note,
        leaderboard=leaderboard_table(groups) if several_models else None,
        leaderboard_rule=LEADERBOARD_RULE,
        by_family=family_table(groups),
        by_turn=uar_by_turn_table(groups),
        tof=tof_table(groups),
        survival=survival_table(groups),
        first_flip=first_flip_table(groups),
        failure_modes=failure_mode_table(groups) if any_modes else None,
        paired=paired_table(paired),
        several_models=several_models,
    )
    return _write(out_dir, text)
