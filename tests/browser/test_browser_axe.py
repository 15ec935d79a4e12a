"""axe-core, the accessibility engine behind Lighthouse, finds no serious and no critical violation of the WCAG 2.1
A and AA rules on any view, in normal, presenter and high-contrast mode; every chart has a text alternative as its
accessible name; an opened text description (its list and its table) passes too.

The counts per view once taken on the shipped model, before and after the fixes: docs/accessibility.md.
"""
from __future__ import annotations

import json

import pytest

from axe_support import MODES, open_view, run_axe, serious, settle, summarize
from browser_support import CHART, runs, wait_new_run
from model.records import VIEWS


def _report(summary: dict) -> str:
    bad = {rule: r for rule, r in summary["rules"].items() if r["impact"] in ("serious", "critical")}
    return json.dumps(bad, indent=1, ensure_ascii=False)[:4000]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("view", list(VIEWS))
def test_no_serious_or_critical_violation(page, app_server, view, mode):
    open_view(page, app_server, view, mode)
    summary = summarize(run_axe(page))
    assert serious(summary) == {}, f"{view}, {mode}:\n{_report(summary)}"
    charts = page.locator(CHART)
    names = [charts.nth(i).get_attribute("aria-label") or "" for i in range(charts.count())]
    assert all(name.strip() for name in names), f"{view}, {mode}: a chart without a text alternative"


def test_an_opened_text_description_passes_and_reads_the_figure(page, app_server):
    open_view(page, app_server, "Attention", "normal")
    label = page.locator(CHART).first.get_attribute("aria-label")
    toggle = page.locator("[data-testid='stExpander'] summary").filter(has_text="Text description and numbers").first
    before = runs(page)
    toggle.click()
    wait_new_run(page, before)  # drawn only once opened
    settle(page)
    box = page.locator("[data-testid='stExpander']").filter(has_text="Text description and numbers").first
    text = box.inner_text()
    assert "For each query" in text and "largest weight" in text
    assert label.split(". ")[0] in label  # the chart's accessible name is the description's summary
    table = box.locator("table")
    assert table.count() >= 1 and table.first.locator("th").count() > 2  # the numbers, with row and column heads
    summary = summarize(run_axe(page))
    assert serious(summary) == {}, _report(summary)
