"""report.html without a browser: JSON escaping, a self-contained page, the data against the
store, and the --html options."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from tests.reports.html_runs import (
    DISAGREE,
    JUDGE,
    JUDGE2,
    REASONING,
    UNJUDGED,
    XSS_ID,
    XSS_REPLIES,
    XSS_RUN_NAME,
    XSS_USER,
    Runs,
    make_runs,
    query,
)
from typer.testing import CliRunner

from medpress.cli import app
from medpress.cli.results import make_report
from medpress.judges import label_rows, resolve_view
from medpress.metrics import all_paired_differences, compute_groups
from medpress.reports import write_report
from medpress.reports.html import embed_json, inline_script, write_html_report
from medpress.reports.html_data import _span
from medpress.reports.tables import headline_table
from medpress.reports.write import REPORT_FILES
from medpress.store import RunStore
from medpress.testing.toy_judge import toy_verdict

DATA_OPEN = '<script type="application/json" id="medpress-data">'


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return make_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def page(runs: Runs) -> str:
    out = runs.a.parent / "report"
    make_report([runs.a, runs.b], out, "ensemble", n_boot=50, html=True)
    return (out / "report.html").read_text(encoding="utf-8")


def payload(html: str) -> dict[str, Any]:
    start = html.index(DATA_OPEN) + len(DATA_OPEN)
    data: dict[str, Any] = json.loads(html[start:html.index("</script>", start)])
    return data


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each script element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None


def test_embed_json_cannot_leave_its_script_tag() -> None:
    data = {"reply": "</script><script>alert(1)</script>", "c": "<!-- x --> & y",
            "sep": "a\u2028b\u2029c", "nested": ["</SCRIPT >", {"k<": ">"}], "n": 1.5}
    text = embed_json(data)
    for char in ("<", ">", "&", "\u2028", "\u2029"):
        assert char not in text
    assert json.loads(text) == data
    with pytest.raises(ValueError):
        embed_json({"x": float("nan")})


def test_evidence_spans_count_utf16_units_as_javascript_does() -> None:
    reply = "Bien sûr 🙂 — please see a doctor today."
    start, end = _span(reply, " please see a doctor ")  # type: ignore[misc]
    assert (start, end) == (14, 33)  # 🙂 is two UTF-16 units
    assert reply.encode("utf-16-le")[2 * start:2 * end].decode("utf-16-le") == \
        "please see a doctor"
    assert _span(reply, "not in the reply") == "not in the reply"
    assert _span(reply, "  ") == "  "


def test_inline_script_breaks_up_closing_tags() -> None:
    js = 'var a = "</script><!-- </SCRIPT> </Script >";'
    out = inline_script(js)
    assert "</script" not in out.lower() and "<!--" not in out
    assert out == 'var a = "<\\/script><\\!-- <\\/SCRIPT> <\\/Script >";'


def test_page_is_self_contained(page: str) -> None:
    parser = Tags()
    parser.feed(page)
    # nothing is loaded: no src/href/srcset/action attribute at all outside the scripts' text,
    # no element that fetches
    for tag, attrs in parser.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed", "base"), tag
        for name in ("src", "href", "srcset", "action", "poster", "data"):
            assert name not in attrs, (tag, attrs)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", _outside_scripts(page))
    # three inline scripts (data, plotly.js, app), each executable one allowed by its hash
    assert [a.get("type") for a, _ in parser.scripts] == ["application/json", "text/plain",
                                                          None]
    csp = next(a["content"] for t, a in parser.tags
               if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert csp is not None and "default-src 'none'" in csp and "connect-src 'none'" in csp
    for attrs, text in parser.scripts[1:]:
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
        assert "src" not in attrs
    assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";", 1)[0]
    assert "Plotly" in parser.scripts[1][1] and "medpress-data" in parser.scripts[2][1]


def _outside_scripts(page: str) -> str:
    return re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)


def test_payload_matches_the_store(runs: Runs, page: str) -> None:
    data = payload(page)
    assert data["schema"] == 1
    assert [r["name"] for r in data["runs"]] == ["scripted/caves_at_3", XSS_RUN_NAME]
    assert data["runs"][0]["judges"] == [JUDGE, JUDGE2] and data["runs"][1]["judges"] == [JUDGE]
    ids = {d for (d,) in query(runs.a, "SELECT DISTINCT dialogue_id FROM turns")}
    assert set(data["dialogues"]) == ids  # one card per dialogue id
    for index, run_dir in enumerate((runs.a, runs.b)):
        units = [u for u in data["units"] if u["r"] == index]
        stored = query(run_dir, "SELECT condition, repeat, dialogue_id, COUNT(*) FROM turns "
                                "GROUP BY 1, 2, 3")
        assert sorted((u["c"], u["k"], u["d"], len(u["t"])) for u in units) == sorted(stored)
        # every reply, user turn and reasoning as stored
        turns = {(u["c"], u["k"], u["d"], t["n"]): (u, t) for u in units for t in u["t"]}
        for c, k, d, n, user, reply, reasoning in query(
                run_dir, "SELECT condition, repeat, dialogue_id, turn, user, reply, reasoning "
                         "FROM turns"):
            u, t = turns[(c, k, d, n)]
            assert t["a"] == reply and t.get("z") == reasoning
            assert t.get("u", data["dialogues"][d]["turns"][n - 1]["u"]) == user
        # labels and the turn of flip are those the metrics use
        store = RunStore.open_existing(run_dir)
        rows, _ = label_rows(store, resolve_view(store, "ensemble"))
        store.close()
        for r in rows:
            assert turns[(r.condition, r.repeat, r.dialogue_id, r.turn)][1]["l"] == r.label
        for u in units:
            unsafe = [r.turn for r in rows if (r.condition, r.repeat, r.dialogue_id)
                      == (u["c"], u["k"], u["d"]) and r.label == "UNSAFE"]
            assert u["f"] == (min(unsafe) if unsafe else None)


def test_disagreement_unjudged_and_evidence(runs: Runs, page: str) -> None:
    data = payload(page)
    by_key = {(u["r"], u["c"], u["k"], u["d"]): u for u in data["units"]}
    c, k, d, n = DISAGREE
    unit = by_key[(0, c, k, d)]
    turn = unit["t"][n - 1]
    assert unit["g"] == 1 and turn["g"] == 1 and turn["l"] == "UNSAFE"  # the severe side
    assert sorted(turn["v"]) == sorted([[JUDGE, "SAFE"], [JUDGE2, "UNSAFE"]])
    assert sum(1 for u in data["units"] if u.get("g")) == 1
    c, k, d, n = UNJUDGED
    turn = by_key[(1, c, k, d)]["t"][n - 1]
    assert turn["l"] is None and turn["j"] == [[JUDGE, "judge timed out"]]
    # evidence: the judge's quotes, found in the reply, as spans of it
    quoted = [t for u in data["units"] for t in u["t"] if t.get("e")]
    assert quoted
    for t in quoted:  # the toy judge's quote (replies are ASCII: code points = UTF-16 units)
        assert [t["a"][s:end] for s, end in t["e"]] == [toy_verdict(t["a"])["evidence"]]
    assert by_key[(0, "direct", 0, "MT-0001")]["t"][0]["z"] == REASONING


def test_xss_payloads_are_data_not_markup(page: str) -> None:
    data = payload(page)
    xss = [u for u in data["units"] if u["d"] == XSS_ID]
    assert len(xss) == 6
    for u in xss:
        assert [t["a"] for t in u["t"][:2]] == list(XSS_REPLIES)
    assert data["dialogues"][XSS_ID]["turns"][0]["u"] == XSS_USER
    assert data["runs"][1]["name"] == XSS_RUN_NAME
    # raw, the payloads appear nowhere in the file: escaped in tables, \u003c in the data
    for raw in ('onerror="window.__xss=1"', "<script>alert(1)", "<script>window.__xss",
                '<a href="javascript:'):
        assert raw not in page
    assert str(escape(XSS_RUN_NAME)) in _outside_scripts(page)


def test_tables_are_the_reports(runs: Runs, page: str) -> None:
    store_rows = []
    for rd in (runs.a, runs.b):
        store = RunStore.open_existing(rd)
        name = "scripted/caves_at_3" if rd == runs.a else XSS_RUN_NAME
        store_rows += label_rows(store, "ensemble", name=name)[0]
        store.close()
    groups = compute_groups(store_rows, n_boot=50, seed=0)
    body = _outside_scripts(page)
    for row in headline_table(groups).rows:
        assert "<td>" + "</td><td>".join(str(escape(c)) for c in row) + "</td>" in body
    for testid in ("table-headline", "table-leaderboard", "table-family", "table-uar-by-turn",
                   "table-survival", "table-failure-modes", "table-paired", "chart-heatmap"):
        assert f'data-testid="{testid}"' in body


def test_results_alone_and_stale_page_removed(tmp_path: Path, runs: Runs) -> None:
    store = RunStore.open_existing(runs.b)
    rows, desc = label_rows(store, JUDGE)
    store.close()
    groups = compute_groups(rows, n_boot=0)
    path = write_html_report(tmp_path, groups, all_paired_differences(rows, n_boot=0),
                             judge=desc)
    data = payload(path.read_text())
    assert data["units"] == [] and data["dialogues"] == {}
    assert [r["name"] for r in data["runs"]] == ["scripted/flip_flop"]
    assert "report.html" in REPORT_FILES
    write_report(tmp_path, rows, [], judge=desc, n_boot=0)  # without html: none left stale
    assert not path.exists() and (tmp_path / "report.md").exists()


def test_report_and_run_commands_take_html(tmp_path: Path, runs: Runs) -> None:
    out = tmp_path / "rep"
    result = CliRunner().invoke(app, ["report", str(runs.b), "--judge", JUDGE, "--out",
                                      str(out), "--n-boot", "20", "--html"])
    assert result.exit_code == 0, result.output
    assert (out / "report.html").is_file() and "report.html" in result.output
    assert len(payload((out / "report.html").read_text())["units"]) == 75
    result = CliRunner().invoke(app, ["report", str(runs.b), "--judge", JUDGE, "--out",
                                      str(out), "--n-boot", "20"])
    assert result.exit_code == 0 and not (out / "report.html").exists()
    help_text = CliRunner().invoke(app, ["run", "--help"], terminal_width=200).output
    assert "--html" in help_text
