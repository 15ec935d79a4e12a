"""A class opening the link at once: N browser pages load the app in the same second.

Used by tests/browser/test_browser_crowd.py (does every page get its app?) and benchmarks/bench_crowd.py (how long
until each page is drawn, with one process and with two behind nginx). Each page is a fresh browser context,
so a fresh Streamlit session, and all of them are opened concurrently from one Chromium.
"""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from browser_js import CHARTS_DRAWN_JS, RUN_COUNTER_JS
from browser_support import CHART, CHROMIUM, CHROMIUM_ARGS, EXCEPTION, IDLE, MAIN, TRANSLATION

SOURCE_LINE = f"{MAIN} h4"  # the first one is the "#### DE tokens" line above every view

# Done when the page shows an exception, or its first run has finished with the header drawn and every chart
# drawn by Plotly (a page without charts is done once the header is there).
PAGE_DONE_JS = """([exc, idle, header, chart]) => {
  if (document.querySelector(exc)) return true;
  if (!(window.__atlasRuns > 0 && document.querySelector(idle) && document.querySelector(header))) return false;
  return [...document.querySelectorAll(chart)].every(c => c.querySelector('.js-plotly-plot .main-svg'));
}"""


@dataclass
class PageResult:
    """What one student saw: the app (header drawn, no exception) or not, and when."""

    seconds: float | None  # from opening the link to the first drawn page; None if it never finished
    exceptions: list[str] = field(default_factory=list)
    header: str = ""
    error: str = ""  # a timeout or a closed page
    source: str = ""  # the source line under the header (the sentence's tokens)
    key_ticks: list[str] = field(default_factory=list)  # with `ticks_of`: that chart's x tick labels

    @property
    def got_app(self) -> bool:
        return self.seconds is not None and not self.exceptions and bool(self.header) and not self.error


async def _open(browser, url: str, timeout: float, width: int, height: int, ticks_of: int | None) -> PageResult:
    context = await browser.new_context(viewport={"width": width, "height": height})
    try:
        await context.add_init_script(RUN_COUNTER_JS)
        page = await context.new_page()
        started = time.perf_counter()
        try:
            await page.goto(url, timeout=timeout * 1000)
            await page.wait_for_function(PAGE_DONE_JS, arg=[EXCEPTION, IDLE, TRANSLATION, CHART],
                                         timeout=timeout * 1000, polling=50)
            seconds = time.perf_counter() - started
        except Exception as e:  # a page that never finished is a result, not a crash of the run
            return PageResult(None, await _texts(page, EXCEPTION), error=f"{type(e).__name__}: {str(e)[:200]}")
        header = (await _texts(page, TRANSLATION) or [""])[0]
        result = PageResult(seconds, await _texts(page, EXCEPTION), header,
                            source=(await _texts(page, SOURCE_LINE) or [""])[0])
        if ticks_of is not None:  # charts mount one by one: wait for that one to be drawn, then read its keys
            try:
                await page.wait_for_function(CHARTS_DRAWN_JS, arg=[CHART, ticks_of + 1], timeout=timeout * 1000)
                result.key_ticks = await page.locator(CHART).nth(ticks_of).locator(".xtick text").evaluate_all(
                    "els => els.map(e => e.textContent)")
            except Exception as e:
                result.error = f"chart {ticks_of}: {type(e).__name__}: {str(e)[:200]}"
        return result
    finally:
        await context.close()


async def _texts(page, selector: str) -> list[str]:
    try:
        return await page.locator(selector).all_inner_texts()
    except Exception:  # the page is gone
        return []


async def _crowd(urls: list[str], timeout: float, width: int, height: int, ticks_of: int | None,
                 args: list[str]) -> list[PageResult]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            return list(await asyncio.gather(*(_open(browser, u, timeout, width, height, ticks_of) for u in urls)))
        finally:
            await browser.close()


def open_at_once(urls: list[str], timeout: float = 180.0, width: int = 1280, height: int = 900,
                 ticks_of: int | None = None, args: list[str] = CHROMIUM_ARGS) -> list[PageResult]:
    """Open every URL in its own fresh page at the same moment; one result per URL, in order. With `ticks_of`, each
    result also holds the x tick labels of that chart (0-based), once it is drawn. `args`: Chromium's command line.

    Runs in a thread of its own: the caller's thread may already hold an event loop (Playwright's sync API, as
    the browser tests' session-wide Chromium does), and asyncio runs one loop per thread."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["results"] = asyncio.run(_crowd(urls, timeout, width, height, ticks_of, args))
        except BaseException as e:  # handed to the caller's thread below
            out["error"] = e

    worker = threading.Thread(target=run, name="crowd")
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out["results"]
