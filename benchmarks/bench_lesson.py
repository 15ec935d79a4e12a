"""How large is the lesson file of five sentences, how long does it take to build, and to open?

    python benchmarks/bench_lesson.py [--sentences 5] [--repeats 3] [--browser] [--screenshot PNG]

The app's first --sentences examples built as `python -m model.export S1 … --html FILE` builds them, one torch thread:
traces and page timed apart (median of --repeats after a warm-up), bytes (Plotly's code, figures and text), figures
(stored whole; the rest as differences). --browser: opened from file:// in Chromium, every request blocked, until
every chart is drawn, and a sentence switch; --screenshot saves its top. Writes results/lesson.json.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, open_translator, summary, table, write_results

# Switch to sentence 2 and wait until every chart of a sentence has drawn again; seconds, on the page's clock.
SWITCH_JS = """async () => {
  const ids = ["chart-heads", "chart-head", "chart-grid", "chart-cand", "chart-cross", "chart-stages", "chart-scaling"];
  const drawn = Promise.all(ids.map(id => new Promise(r => document.getElementById(id).once("plotly_afterplot", r))));
  const t0 = performance.now(), select = document.getElementById("sentence");
  select.value = "1";
  select.dispatchEvent(new Event("change"));
  await drawn;
  return (performance.now() - t0) / 1000;
}"""
DRAWN = ("() => document.body.dataset.ready === 'true' && [...document.querySelectorAll('.chart')]"
         ".every(d => d.querySelector('.main-svg'))")


def build(translator, sentences: list[str], name: str, repeats: int) -> tuple[str, dict]:
    """The page (as the command line writes it) and the seconds its two parts took, median of `repeats`."""
    from model.io.lesson import lesson_data
    from viz.lesson import lesson_html

    trace_s, page_s, page = [], [], ""
    for i in range(repeats + 1):  # the first run warms up (imports, caches) and is not counted
        t0 = time.perf_counter()
        data = lesson_data(translator, [(translator.trace(s), None) for s in sentences], name)
        t1 = time.perf_counter()
        page = lesson_html(data, "with python -m model.export")
        t2 = time.perf_counter()
        if i:
            trace_s.append(t1 - t0)
            page_s.append(t2 - t1)
    return page, {"trace": summary(trace_s), "page": summary(page_s)}


def sizes(page: str) -> dict:
    """Bytes of the page in all, of Plotly's code and of the data; figures held and stored whole."""
    from plotly.offline import get_plotlyjs

    from viz.lesson_page import page_data

    data = page_data(page)
    pack = data["pack"]
    js = len(get_plotlyjs().encode("utf-8"))
    total = len(page.encode("utf-8"))
    return {"bytes": total, "plotly_js_bytes": js, "data_and_page_bytes": total - js,
            "figures": len(pack["names"]), "stored_whole": sum("fig" in e for e in pack["entries"]),
            "n_sentences": len(data["sentences"]), "steps": [len(s["steps"]) for s in data["sentences"]]}


def in_browser(path: Path, repeats: int, screenshot: str | None) -> dict:
    """Open the file offline in Chromium: load → every chart drawn, and a sentence switch, median of `repeats`."""
    from playwright.sync_api import sync_playwright

    import browser_support as bs

    url = path.resolve().as_uri()
    blocked, opens, switches = [], [], []
    with sync_playwright() as p:
        browser = bs.launch_chromium(p)
        for _ in range(repeats + 1):
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            context.route("**/*", lambda r: r.continue_() if r.request.url == url else (
                blocked.append(r.request.url), r.abort()))
            page = context.new_page()
            t0 = time.perf_counter()
            page.goto(url)
            page.wait_for_function(DRAWN, timeout=120_000, polling="raf")
            opens.append(time.perf_counter() - t0)
            switches.append(page.evaluate(SWITCH_JS))
            if screenshot:
                page.select_option("#sentence", index=0)
                page.wait_for_timeout(500)
                page.screenshot(path=screenshot)
                screenshot = None
            context.close()
        browser.close()
    return {"open": summary(opens[1:]), "switch_sentence": summary(switches[1:]), "blocked_requests": blocked}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--sentences", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--browser", action="store_true", help="also open the file in Chromium, network blocked")
    ap.add_argument("--screenshot", help="save the opened page's top as this PNG (implies --browser)")
    args = ap.parse_args()

    from model.records import APP_EXAMPLES

    translator = open_translator(ROOT / "checkpoints" / args.model, threads=1)
    if translator is None:
        return 2
    sentences = APP_EXAMPLES[: args.sentences]
    page, seconds = build(translator, sentences, args.model, args.repeats)
    result = {"model": args.model, "sentences": sentences, "repeats": args.repeats,
              "torch_threads": 1, "command": f"python -m model.export {' '.join(repr(s) for s in sentences)} "
                                            f"--checkpoint checkpoints/{args.model} --html lesson.html",
              **sizes(page), "seconds": seconds}
    if args.browser or args.screenshot:
        import browser_support as bs

        missing = bs.chromium_missing()
        if missing:
            print(missing, file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "lesson.html"
            path.write_text(page, encoding="utf-8")
            result["browser"] = in_browser(path, args.repeats, args.screenshot)
    write_results("lesson", result)
    report(result)
    return 0


def report(r: dict) -> None:
    """The table: sizes in MB, times as medians."""
    mb = lambda n: f"{n / 1e6:.2f} MB"  # noqa: E731
    rows = [["file", mb(r["bytes"])], ["  Plotly's code", mb(r["plotly_js_bytes"])],
            ["  figures, text, page", mb(r["data_and_page_bytes"])],
            ["figures (stored whole)", f"{r['figures']:,} ({r['stored_whole']})"],
            ["traces (s, median)", f"{r['seconds']['trace']['median_ms'] / 1000:.2f}"],
            ["page build (s, median)", f"{r['seconds']['page']['median_ms'] / 1000:.2f}"]]
    if "browser" in r:
        b = r["browser"]
        rows += [["open offline → drawn (s)", f"{b['open']['median_ms'] / 1000:.2f}"],
                 ["switch sentence (s)", f"{b['switch_sentence']['median_ms'] / 1000:.2f}"],
                 ["requests blocked", str(len(b["blocked_requests"]))]]
    print(f"lesson file of {r['n_sentences']} sentences, {r['model']}")
    print(table(rows, ["", "value"]))
    if "browser" in r and r["browser"]["blocked_requests"]:
        print("the page asked for: " + ", ".join(r["browser"]["blocked_requests"][:5]), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
