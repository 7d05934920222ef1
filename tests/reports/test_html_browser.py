"""report.html in headless Chromium (Debian's ``chromium``, driven by Playwright): filters
against the store, a dialogue with its labels, evidence and side-by-side view, XSS payloads,
deep links, no network, and a screenshot that is not blank."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.reports.html_runs import (
    DISAGREE,
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

from medpress.cli.results import make_report
from medpress.judges import label_rows, resolve_view
from medpress.metrics import LabelRow
from medpress.store import RunStore

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no `chromium` on PATH: the browser tests need Debian's chromium "
    "(`make test` installs it: apt-get install -y chromium)")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                               "(it is in the dev extra: pip install -e '.[dev]')")

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
# Records Content-Security-Policy violations: a blocked load or an injected script/handler.
WATCH_CSP = ("window.__csp = []; document.addEventListener('securitypolicyviolation', "
             "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
Key = tuple[int, str, int, str]  # (run index, condition, repeat, dialogue id)


@dataclass
class Report:
    path: Path
    runs: Runs
    rows: dict[int, list[LabelRow]]
    """Each run's label rows (the ensemble view the report used), read from its store."""

    @property
    def url(self) -> str:
        return self.path.as_uri()

    def labels(self, key: Key) -> list[str | None]:
        r, c, k, d = key
        found = sorted((x.turn, x.label) for x in self.rows[r]
                       if (x.condition, x.repeat, x.dialogue_id) == (c, k, d))
        return [label for _, label in found]


@dataclass
class Watched:
    """A page and everything it must never do."""

    page: Any
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def check_clean(self) -> None:
        assert self.dialogs == [], f"a dialog fired: {self.dialogs}"
        assert self.requests == [], f"the page fetched: {self.requests}"
        assert self.errors == [], f"page errors: {self.errors}"
        assert self.page.evaluate("window.__xss") is None
        assert self.page.evaluate("window.__csp") == []


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    runs = make_runs(tmp_path_factory.mktemp("runs"))
    out = runs.a.parent / "report"
    make_report([runs.a, runs.b], out, "ensemble", n_boot=50, html=True)
    rows = {}
    for i, rd in enumerate((runs.a, runs.b)):
        store = RunStore.open_existing(rd)
        rows[i] = label_rows(store, resolve_view(store, "ensemble"))[0]
        store.close()
    return Report(out / "report.html", runs, rows)


@pytest.fixture(scope="module")
def browser(report: Report) -> Iterator[Any]:
    # after `report`: Playwright's sync API holds an event loop, and the runs need asyncio.run
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    w = Watched(page)
    page.on("dialog", lambda d: (w.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: w.errors.append(str(e)))

    def route(r: Any) -> None:
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            w.requests.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.add_init_script(WATCH_CSP)
    yield w
    context.close()


def load(w: Watched, report: Report, fragment: str = "") -> Any:
    page = w.page
    page.goto(report.url + fragment)
    page.wait_for_selector("html[data-ready='1']")
    return page


def count(page: Any) -> int:
    return int(page.get_attribute("[data-testid=match-count]", "data-count"))


def units_where(report: Report, keep: Any) -> int:
    """Dialogue runs whose label rows satisfy ``keep(rows)``, over both runs."""
    n = 0
    for r, rows in report.rows.items():
        by_unit: dict[tuple[str, int, str], list[LabelRow]] = {}
        for x in rows:
            by_unit.setdefault((x.condition, x.repeat, x.dialogue_id), []).append(x)
        n += sum(1 for unit in by_unit.values() if keep(r, sorted(unit, key=lambda x: x.turn)))
    return n


def test_filters_count_what_the_store_holds(watched: Watched, report: Report) -> None:
    page = load(watched, report, "#tab=transcripts")
    a, b = report.runs.a, report.runs.b
    total = sum(n for rd in (a, b) for (n,) in query(
        rd, "SELECT COUNT(*) FROM (SELECT DISTINCT condition, repeat, dialogue_id FROM turns)"))
    assert count(page) == total == 150
    assert page.locator("[data-testid=unit-row]").count() == 50
    replies = sum(n for rd in (a, b) for (n,) in query(rd, "SELECT COUNT(*) FROM turns"))
    assert int(page.get_attribute("[data-testid=match-count]", "data-replies")) == replies

    page.select_option("[data-testid=filter-condition]", "persona_anti")
    expected = sum(n for rd in (a, b) for (n,) in query(
        rd, "SELECT COUNT(DISTINCT dialogue_id) FROM turns WHERE condition = 'persona_anti'"))
    assert count(page) == expected == 50

    # run b alone (one judge: plain SQL), UNSAFE at turn 2
    page.select_option("[data-testid=filter-condition]", "")
    page.select_option("[data-testid=filter-run]", "1")
    page.select_option("[data-testid=filter-label]", "UNSAFE")
    page.select_option("[data-testid=filter-label-turn]", "2")
    ((n,),) = query(b, "SELECT COUNT(*) FROM judgments WHERE turn = 2 AND label = 'UNSAFE'")
    assert count(page) == n > 0

    # both runs: self_care, first UNSAFE at turn 1 (the strict judge's doing in run a)
    page.click("[data-testid=filter-reset]")
    assert count(page) == 150
    page.select_option("[data-testid=filter-family]", "self_care")
    page.select_option("[data-testid=filter-flip]", "1")
    expected = units_where(report, lambda r, u: u[0].family == "self_care" and next(
        (x.turn for x in u if x.label == "UNSAFE"), None) == 1)
    assert count(page) == expected == 1
    page.select_option("[data-testid=filter-flip]", "none")
    assert count(page) == units_where(report, lambda r, u: u[0].family == "self_care" and all(
        x.label != "UNSAFE" for x in u)) == 0

    page.click("[data-testid=filter-reset]")
    page.check("[data-testid=filter-unjudged]")
    assert count(page) == units_where(report, lambda r, u: any(x.label is None for x in u)) == 1
    page.uncheck("[data-testid=filter-unjudged]")
    page.check("[data-testid=filter-disagree]")
    assert count(page) == 1
    page.uncheck("[data-testid=filter-disagree]")

    page.select_option("[data-testid=filter-mode]", "caveated_permission")
    assert count(page) == units_where(report, lambda r, u: any(
        x.failure_mode == "caveated_permission" and x.label in ("UNSAFE", "AMBIGUOUS")
        for x in u))
    page.select_option("[data-testid=filter-mode]", "")

    page.fill("[data-testid=filter-search]", "JavaScript:alert")  # case-insensitive
    expected = sum(n for rd in (a, b) for (n,) in query(
        rd, "SELECT COUNT(*) FROM (SELECT DISTINCT condition, repeat, dialogue_id FROM turns "
            "WHERE user LIKE '%javascript:alert%' OR reply LIKE '%javascript:alert%')"))
    assert count(page) == expected == 6
    page.fill("[data-testid=filter-search]", "")
    page.select_option("[data-testid=filter-area]", '<img src=x onerror="window.__xss=1">area')
    assert count(page) == 6

    # paging: 150 rows, 50 a page
    page.click("[data-testid=filter-reset]")
    page.click("[data-testid=page-next]")
    page.click("[data-testid=page-next]")
    assert page.inner_text("[data-testid=page-info]") == "Page 3 of 3"
    assert page.locator("[data-testid=unit-row]").count() == 50
    assert page.is_disabled("[data-testid=page-next]")
    watched.check_clean()


def test_dialogue_labels_evidence_and_side_by_side(watched: Watched, report: Report) -> None:
    page = load(watched, report, "#tab=transcripts")
    page.select_option("[data-testid=filter-run]", "0")
    page.select_option("[data-testid=filter-family]", "medication_treatment")
    page.click("[data-testid=unit-row][data-key='0|direct|0|MT-0001']")
    view = page.locator("[data-testid=dialogue-view]")
    assert view.is_visible()
    main = "[data-pane=pane-main]"
    chips = page.locator(f"{main} [data-testid=label-chip]").all_inner_texts()
    assert chips == report.labels((0, "direct", 0, "MT-0001")) == ["SAFE", "SAFE", "UNSAFE",
                                                                  "UNSAFE", "UNSAFE"]
    # the flip: marked on the first UNSAFE reply only
    flips = page.locator(f"{main}[data-testid=turn]:has([data-testid=flip-marker])")
    assert flips.count() == 1 and flips.get_attribute("data-turn") == "3"
    # evidence: the judge's quote, highlighted inside the reply text
    (evidence, reply), = query(report.runs.a, "SELECT j.evidence, t.reply FROM judgments j "
                               "JOIN turns t USING (condition, repeat, dialogue_id, turn) "
                               "WHERE j.judge = 'toy' AND condition = 'direct' AND "
                               "dialogue_id = 'MT-0001' AND turn = 3")
    turn3 = page.locator(f"{main}[data-testid=turn][data-turn='3']")
    mark = turn3.locator("[data-testid=reply-text] mark[data-testid=evidence]")
    assert mark.count() == 1 and mark.text_content() == evidence
    assert turn3.locator("[data-testid=reply-text]").text_content() == reply
    assert "toy rule" in turn3.locator("[data-testid=rationale]").first.inner_text()
    assert "toy UNSAFE" in turn3.locator("[data-testid=votes]").inner_text()
    # reasoning: collapsed, apart from the answer, shown as text
    details = turn3.locator("details[data-testid=reasoning]")
    assert details.count() == 1 and details.get_attribute("open") is None
    details.locator("summary").click()
    assert details.locator(".reasoning-text").text_content() == REASONING
    assert page.locator("[data-testid=dialogue-card] dd[data-field=Topic]").inner_text() \
        == "topic-0"

    # side by side: the same dialogue under persona_anti, then in the other run
    other: Key = (0, "persona_anti", 0, "MT-0001")
    page.select_option("[data-testid=compare-select]", "|".join(map(str, other)))
    right = page.locator("[data-pane=pane-compare] [data-testid=label-chip]").all_inner_texts()
    assert right == report.labels(other)
    assert page.locator("[data-pane=pane-main] [data-testid=label-chip]").all_inner_texts() \
        == chips
    assert "persona_anti" in page.inner_text("[data-testid=pane-compare-head]")
    run_b: Key = (1, "direct", 0, "MT-0001")
    page.select_option("[data-testid=compare-select]", "|".join(map(str, run_b)))
    right = page.locator("[data-pane=pane-compare] [data-testid=label-chip]").all_inner_texts()
    assert right == [x or "unjudged" for x in report.labels(run_b)]
    assert right[UNJUDGED[3] - 1] == "unjudged"
    assert "judge timed out" in page.inner_text("[data-pane=pane-compare] "
                                                "[data-testid=judge-error]")
    watched.check_clean()


def test_disagreement_is_shown(watched: Watched, report: Report) -> None:
    c, k, d, n = DISAGREE
    page = load(watched, report, f"#tab=transcripts&dis=1&open=0%7C{c}%7C{k}%7C{d}")
    assert count(page) == 1
    turn = page.locator(f"[data-pane=pane-main][data-turn='{n}']")
    assert turn.locator("[data-testid=label-chip]").inner_text() == "UNSAFE"
    assert turn.locator("[data-testid=disagree-marker]").count() == 1
    votes = turn.locator("[data-testid=votes]").inner_text()
    assert "toy SAFE" in votes and "toy-strict UNSAFE" in votes
    watched.check_clean()


def test_xss_payloads_show_as_text_and_run_nothing(watched: Watched, report: Report) -> None:
    page = load(watched, report, "#tab=transcripts")
    page.select_option("[data-testid=filter-run]", "1")
    page.fill("[data-testid=filter-search]", "<script>")
    page.click(f"[data-testid=unit-row][data-key='1|direct|0|{XSS_ID}']")
    main = "[data-pane=pane-main]"
    replies = page.locator(f"{main} [data-testid=reply-text]")
    assert replies.nth(0).text_content() == XSS_REPLIES[0]
    assert replies.nth(1).text_content() == XSS_REPLIES[1]
    assert XSS_REPLIES[0] in replies.nth(0).inner_text()  # visible, not just in the DOM
    users = page.locator(f"{main} [data-testid=user-text]")
    assert users.nth(0).text_content() == XSS_USER
    assert 'href="javascript:alert(1)"' in users.nth(1).text_content()
    assert XSS_RUN_NAME in page.inner_text("[data-testid=dialogue-title]")
    assert XSS_RUN_NAME in page.locator("[data-testid=filter-run] option").all_inner_texts()
    card = page.locator("[data-testid=dialogue-card]")
    assert '<img src=x onerror="window.__xss=1">area' in card.inner_text()
    # nothing was parsed as markup: no injected element anywhere
    assert page.locator("img").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.locator("script").count() == 3
    # the results: tables and plotly charts with the hostile run name
    page.click("[data-testid=tab-results]")
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 5")
    assert XSS_RUN_NAME in page.inner_text("[data-testid=table-headline]")
    assert XSS_RUN_NAME in page.locator("#chart-heatmap").text_content()  # an axis label
    assert page.locator("img").count() == 0
    page.wait_for_timeout(200)
    watched.check_clean()


def test_deep_link_round_trip(watched: Watched, report: Report, browser: Any) -> None:
    page = load(watched, report, "#tab=transcripts")
    page.select_option("[data-testid=filter-condition]", "direct")
    page.select_option("[data-testid=filter-label]", "UNSAFE")
    page.select_option("[data-testid=filter-label-turn]", "3")
    page.fill("[data-testid=filter-search]", "dialogue 4 ")
    first = page.locator("[data-testid=unit-row]").first
    key = first.get_attribute("data-key")
    first.click()
    page.select_option("[data-testid=compare-select]", index=1)
    compared = page.input_value("[data-testid=compare-select]")
    url, n, title = page.url, count(page), page.inner_text("[data-testid=dialogue-title]")
    assert "cond=direct" in url and "open=" in url and n >= 1

    other = browser.new_page()
    other.add_init_script(WATCH_CSP)
    other.goto(url)
    other.wait_for_selector("html[data-ready='1']")
    assert count(other) == n
    assert other.input_value("[data-testid=filter-condition]") == "direct"
    assert other.input_value("[data-testid=filter-label]") == "UNSAFE"
    assert other.input_value("[data-testid=filter-label-turn]") == "3"
    assert other.input_value("[data-testid=filter-search]") == "dialogue 4 "
    assert other.inner_text("[data-testid=dialogue-title]") == title
    assert other.input_value("[data-testid=compare-select]") == compared
    assert other.locator("[data-pane=pane-compare]").count() > 0
    assert other.locator(f"[data-testid=unit-row][data-key='{key}']").get_attribute("class") \
        == "open"
    # editing the fragment by hand (or going back) re-applies it
    other.evaluate("location.hash = '#tab=transcripts&cond=persona'")
    other.wait_for_function("document.querySelector('[data-testid=match-count]')"
                            ".getAttribute('data-count') === '50'")
    assert other.is_hidden("[data-testid=dialogue-view]")
    assert other.evaluate("window.__csp") == []
    other.close()
    watched.check_clean()


def test_screenshot_is_not_blank(watched: Watched, report: Report, tmp_path: Path) -> None:
    from PIL import Image

    page = load(watched, report)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 5")
    shot = tmp_path / "report_html.png"
    page.screenshot(path=str(shot), full_page=True)
    image = Image.open(shot).convert("L")
    assert image.width >= 1000 and image.height >= 1000
    histogram = image.histogram()  # grey levels 0..255
    assert sum(histogram[:245]) / sum(histogram) > 0.01  # more than 1% not white
    # the charts drew marks, not empty axes
    assert page.locator("#chart-uar-by-turn .scatterlayer .trace").count() == 6
    assert page.locator("#chart-family .barlayer .trace").count() == 6
    watched.check_clean()
