"""axe-core, the accessibility engine behind Lighthouse, finds no serious and no critical violation of the WCAG 2.1
A and AA rules on an opened text description (its list and its table), and the description reads the figure whose
accessible name it gives. The views themselves, in presenter and high-contrast mode, and every chart's text
alternative in every mode: tests/browser/test_browser_tour.py.

The counts per view once taken on the shipped model, before and after the fixes: docs/accessibility.md.
"""
from __future__ import annotations

import json
import re

from axe_support import open_view, run_axe, serious, settle, summarize
from browser_support import CHART, runs, wait_new_run


def _report(summary: dict) -> str:
    bad = {rule: r for rule, r in summary["rules"].items() if r["impact"] in ("serious", "critical")}
    return json.dumps(bad, indent=1, ensure_ascii=False)[:4000]


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
    # The chart's accessible name is this figure's summary: it opens with the figure's own title, every word of it.
    title = page.locator(CHART).first.evaluate("c => c.querySelector('.js-plotly-plot').layout.title.text")
    words = re.sub(r"<[^>]+>", " ", title).split()
    assert words and all(w in label.split(". ")[0] for w in words), (title, label)
    table = box.locator("table")
    assert table.count() >= 1 and table.first.locator("th").count() > 2  # the numbers, with row and column heads
    summary = summarize(run_axe(page))
    assert serious(summary) == {}, _report(summary)
