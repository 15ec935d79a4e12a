"""How quickly does the Training page switch film frames? (target: ≤ 0.3 s median)

    python benchmarks/bench_film_page.py [--checkpoint-dir DIR --model NAME] [--repeats 20]

Without --checkpoint-dir, trains a small filmed model first (1 layer, d_model 32, 8 epochs on a 40-pair synthetic
corpus, as the browser tests do) in a temporary folder. Starts `streamlit run app.py`, opens the Training page in
Debian's Chromium, focuses the frame slider and presses → (and ← at the end, so it goes back and forth): from just
before the key press until the script run has finished, the "Step N" line shows the new frame's step and every
chart of the page has finished a plot after the press. Writes benchmarks/results/film_page.json.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from common import ROOT, machine, summary, table, verdict, write_results

TARGET_S = 0.3

FRAME_DONE_JS = """a => {
  const idle = !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']");
  if (!idle || window.__atlasRuns <= a.runs) return false;
  const step = [...document.querySelectorAll("[data-testid='stMain'] strong")]
    .find(e => e.textContent.startsWith('Step '));
  if (!step || step.textContent !== a.step) return false;
  const live = el => !el.closest("[data-stale='true']");
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")].filter(live);
  if (charts.length !== a.charts) return false;
  if (!charts.every(gd => gd.querySelector('.main-svg') && (gd.__atlasPlotted || 0) > window.__atlasT0
                          && gd._fullLayout && !gd._fullLayout._replotting)) return false;
  return performance.now() - window.__atlasT0;
}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint-dir", help="a checkpoint root holding MODEL with its film (default: train one)")
    ap.add_argument("--model", default="filmed")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    import browser_support as bs
    from app_walk import ARM_JS, INPUT_CLOCK_JS, page_content

    missing = bs.chromium_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from model.training.film import load_film

    with tempfile.TemporaryDirectory(prefix="bench_film_page_") as tmp:
        root = Path(args.checkpoint_dir) if args.checkpoint_dir else Path(tmp) / "ckpts"
        if not args.checkpoint_dir:
            (Path(tmp) / "data").mkdir()
            bs._train_with_film(root / args.model, Path(tmp) / "data")
        film = load_film(root / args.model)
        steps = [int(s) for s in film.steps]
        server = bs.start_server(root, args.model, Path(tmp) / "server.log")
        times = []
        try:
            with sync_playwright() as p:
                chromium = bs.launch_chromium(p)
                page = bs.new_page(chromium, timeout=120_000)
                page.add_init_script(f"({INPUT_CLOCK_JS})()")
                bs.open_app(page, server.link(view="Training", kind="cross", layer=1, film_frame=1))
                bs.wait_charts(page, 120_000)
                expect = page_content(page)
                frame, direction = 1, 1
                slider = bs.widget(page, "film_frame").locator("input[type='range']")
                for i in range(args.repeats + 1):
                    if not 1 <= frame + direction <= len(steps):
                        direction = -direction
                    frame += direction
                    page.evaluate(ARM_JS, 5000 + i)
                    slider.focus()
                    runs = bs.runs(page)
                    page.evaluate("() => { window.__atlasT0 = performance.now(); }")  # just before the key press
                    page.keyboard.press("ArrowRight" if direction > 0 else "ArrowLeft")
                    ms = page.wait_for_function(FRAME_DONE_JS, arg={"runs": runs, "step": f"Step {steps[frame - 1]:,}",
                                                                    "charts": expect["charts"]},
                                                polling="raf", timeout=60_000).json_value()
                    if i:  # the first is a warm-up
                        times.append(ms / 1000)
                exceptions = page.locator(bs.EXCEPTION).count()
                chromium.close()
        finally:
            bs.stop_server(server)
    st = summary(times)
    print(table([["film frame switch (Training page)", st["n"], st["median_ms"], st["p10_ms"], st["p90_ms"]]],
                ["action", "n", "median ms", "p10 ms", "p90 ms"]))
    print(f"target ≤ {TARGET_S * 1000:.0f} ms median: {verdict(st['median_ms'] / 1000, TARGET_S)}")
    path = write_results("film_page", {"machine": machine(), "frames": len(steps), "charts": expect["charts"],
                                       "frame_switch": st, "target_s": TARGET_S, "exceptions": exceptions,
                                       "command": "python benchmarks/bench_film_page.py " + " ".join(sys.argv[1:])})
    print(f"wrote {path}")
    return 1 if exceptions else 0


if __name__ == "__main__":
    sys.exit(main())
