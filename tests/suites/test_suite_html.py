"""Issue 18: report.html of a TAF-MED run, in headless Chromium: the suite's labels in the
transcript browser (filter, chips) and its headline table in the results tab."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.suites.conftest import taf_judge
from typer.testing import CliRunner

from medpress.cli import app
from medpress.testing import FakeServer

CHROMIUM = shutil.which("chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def taf_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two scripted TAF-MED runs (3 dialogues, direct), judged by wording; one report.
    (Module-scoped, so its judge server is started here rather than by ``fake_server``.)"""
    root = tmp_path_factory.mktemp("taf")
    server = FakeServer(responder=taf_judge).start()
    try:
        runs = []
        for behaviour in ("always_refuse", "caves_at_3"):
            rd = root / behaviour
            res = invoke("run", "-m", f"scripted/{behaviour}", "--suite", "taf-med",
                         "--sample", "3", "--conditions", "direct", "--judge", "openai/j",
                         "--judge-base-url", server.base_url, "--run-dir", str(rd))
            assert res.exit_code == 0, res.output
            runs.append(str(rd))
    finally:
        server.stop()
    res = invoke("report", *runs, "--out", str(root / "report"), "--html", "--n-boot", "50")
    assert res.exit_code == 0, res.output
    return root / "report" / "report.html"


def test_suite_report_html_payload(taf_report: Path) -> None:
    text = taf_report.read_text()
    data = json.loads(text.split('id="medpress-data">', 1)[1].split("</script>", 1)[0])
    assert data["suite"] == "taf-med" and data["worst"] == "UNSAFE"
    assert data["labels"] == ["UNSAFE", "UNHELPFUL_REFUSAL", "SAFE"]
    assert "bare_refusal" in data["modes"] and len(data["units"]) == 6
    card = next(iter(data["dialogues"].values()))
    assert [row[0] for row in card["x"]] == ["Unsafe act"] and card["safe_stance"]
    assert {u["f"] for u in data["units"]} == {None, 3}
    assert "<title>taf-med 1.0 report</title>" in text and "First UNSAFE" in text


@pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH")
def test_suite_report_in_a_browser(taf_report: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(taf_report.as_uri())
            page.wait_for_selector("html[data-ready='1']")
            # results: the suite's headline table, not MedPRESS's
            heads = page.locator("[data-testid=table-headline] th").all_inner_texts()
            assert heads[-4:] == ["UAR", "URR", "SAR", "collapse_turn"]
            assert page.locator("[data-testid=table-label-by-turn]").count() == 1
            page.click("[data-testid=tab-transcripts]")
            options = page.locator("[data-testid=filter-label] option").all_inner_texts()
            assert options == ["any label", "UNSAFE", "UNHELPFUL_REFUSAL", "SAFE", "unjudged"]
            assert "UNHELPFUL_REFUSAL 15 · SAFE 6 · unjudged 0" in page.inner_text(
                "[data-testid=label-counts]")
            page.select_option("[data-testid=filter-label]", "UNHELPFUL_REFUSAL")
            assert page.get_attribute("[data-testid=match-count]", "data-count") == "3"
            page.locator("[data-testid=unit-row]").first.click()
            chips = page.locator("[data-testid=label-chip]")
            assert chips.all_inner_texts() == ["UNHELPFUL_REFUSAL"] * 5
            assert "other" in (chips.first.get_attribute("class") or "")
            strip = page.locator("[data-testid=unit-row] .chip").first
            assert strip.inner_text() == "UR"
            assert "Unsafe act" in page.inner_text("[data-testid=dialogue-card]")
            assert "never UNSAFE" in page.inner_text("[data-testid=pane-main-head]")
            page.click("[data-testid=tab-results]")
            page.wait_for_timeout(100)
        finally:
            browser.close()
    assert errors == []
