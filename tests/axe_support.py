"""axe-core in the real browser: run the WCAG 2.1 A/AA rules on one view of the app and count what it finds.

Used by tests/test_browser_axe.py (every view, three modes, tiny model) and benchmarks/bench_axe.py (the same
walk on the shipped model, written to benchmarks/results/axe.json). axe-core itself comes with the
`axe-playwright-python` package (its axe.min.js is injected into the page): nothing is downloaded at run time.
"""
from __future__ import annotations

from browser_support import CHART, open_app

TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
IMPACTS = ("critical", "serious", "moderate", "minor")
# The three looks a student or a lecturer sees: as opened, presenter mode (?present=1), high contrast (?contrast=1).
MODES = {"normal": {}, "presenter": {"present": 1}, "high-contrast": {"contrast": 1}}

# Parts of the page axe must not judge, each with why: (CSS selector, reason). Only for what the app cannot change.
EXCLUDE: list[tuple[str, str]] = []


def run_axe(page) -> dict:
    """axe-core's violations of the WCAG 2.0/2.1 A and AA rules on the page as it is now (axe's own JSON)."""
    from axe_playwright_python.sync_playwright import Axe

    context = {"include": [["html"]], "exclude": [[sel] for sel, _ in EXCLUDE]}
    options = {"runOnly": {"type": "tag", "values": TAGS}, "resultTypes": ["violations"]}
    return Axe().run(page, context=context, options=options).response


def summarize(response: dict) -> dict:
    """Per impact, how many rules failed and on how many elements; per rule its impact, element count and the
    first few elements (CSS selectors) with axe's own explanation of the first."""
    rules = {}
    for v in response["violations"]:
        rules[v["id"]] = {"impact": v["impact"], "nodes": len(v["nodes"]), "help": v["help"],
                          "targets": [" ".join(map(str, n["target"])) for n in v["nodes"][:5]],
                          "why": v["nodes"][0].get("failureSummary", "") if v["nodes"] else ""}
    return {"rules_by_impact": {i: sum(r["impact"] == i for r in rules.values()) for i in IMPACTS},
            "nodes_by_impact": {i: sum(r["nodes"] for r in rules.values() if r["impact"] == i) for i in IMPACTS},
            "rules": rules}


def open_view(page, server, view: str, mode: str, **params) -> None:
    """Open `view` in `mode` through a link, and wait until its script run has finished and its charts are drawn
    (axe judges what is on screen: a chart still being drawn has no text yet)."""
    open_app(page, server.link(view=view, **MODES[mode], **params))
    if page.locator(CHART).count():
        page.wait_for_function("""sel => [...document.querySelectorAll(sel)].every(c => {
            const gd = c.querySelector('.js-plotly-plot');
            return gd && gd.querySelector('.main-svg') && gd._fullLayout && !gd._fullLayout._replotting;
        })""", arg=CHART, timeout=60_000, polling="raf")


def serious(summary: dict) -> dict[str, int]:
    """The serious and critical rules that failed, with their element counts (what the test allows none of)."""
    return {rule: r["nodes"] for rule, r in summary["rules"].items() if r["impact"] in ("serious", "critical")}
