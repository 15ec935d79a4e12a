"""How quickly does the app respond in a real browser?

    python benchmarks/bench_app.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--repeats 10]
                                   [--mode normal|presenter|compare]

Starts `streamlit run app.py` on a free port and drives Debian's Chromium with Playwright:
  cold start   from starting the server process to the Overview page fully drawn in a fresh page
               (model load and the first trace included); --cold-repeats fresh servers
  new sentence on the Attention view, type a different sentence and press Ctrl+Enter: until the script
               run that follows has finished, the sentence line above the view shows the new sentence
               and every chart of the view has been drawn again
  layer/head   on the Attention view, pick another layer or head: until the run has finished and the
               single-head chart has been drawn again with the new "layer L, head H" title
Interaction times are measured inside the page, from the key press or pointer press to the frame in
which everything is drawn. --mode presenter measures the Attention view in presenter mode (one head large),
--mode compare side by side (two sentences, one head). Writes benchmarks/results/app.json (app_presenter.json,
app_compare.json).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, add_server_args, distinct_sentences, machine, server_preflight, summary, table, verdict, write_results

TARGETS = {"cold_start_s": 6.0, "new_sentence_median_s": 1.5, "layer_head_median_s": 0.5}

# Records when the user acted: the first Enter key press or pointer press after arm().
INPUT_CLOCK_JS = """() => {
  if (window.__atlasClock) return;
  window.__atlasClock = true;
  window.__atlasT0 = null;
  const mark = () => { if (window.__atlasT0 === null) window.__atlasT0 = performance.now(); };
  document.addEventListener('keydown', e => { if (e.key === 'Enter') mark(); }, true);
  document.addEventListener('pointerdown', mark, true);
}"""

# Tag every chart now on the page and note its redraws; reset the input clock.
ARM_JS = """gen => {
  window.__atlasT0 = null;
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    gd.__atlasGen = gen;
    if (!gd.__atlasHooked && gd.on) {
      gd.__atlasHooked = true;
      gd.on('plotly_afterplot', () => { gd.__atlasPlotted = performance.now(); });
    }
  }
}"""

# A chart counts as drawn again when it is a new element (no tag) or it re-plotted after the input.
REDRAWN_JS = """
  const idle = !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']");
  const fresh = gd => gd.__atlasGen !== a.gen || (gd.__atlasPlotted || 0) > window.__atlasT0;
  const drawn = gd => !!gd.querySelector('.main-svg');
"""

NEW_SENTENCE_DONE_JS = """a => {""" + REDRAWN_JS + """
  if (window.__atlasT0 === null || window.__atlasRuns <= a.runs || !idle) return false;
  const src = document.querySelector("[data-testid='stMain'] h4");
  if (!src || src.innerText === a.oldSource) return false;
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")];
  if (charts.length === 0 || !charts.every(gd => drawn(gd) && fresh(gd))) return false;
  return performance.now() - window.__atlasT0;
}"""

LAYER_HEAD_DONE_JS = """a => {""" + REDRAWN_JS + """
  if (window.__atlasT0 === null || window.__atlasRuns <= a.runs || !idle) return false;
  const gd = document.querySelector(".st-key-" + a.chart + " .js-plotly-plot");
  if (!gd || !drawn(gd) || !fresh(gd)) return false;
  const title = gd.querySelector('.gtitle');
  if (!title || !title.textContent.includes(a.title)) return false;
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")];
  if (!charts.every(drawn)) return false;
  return performance.now() - window.__atlasT0;
}"""


def cold_start(bs, chromium, ckpt_dir: Path, model: str, env: dict, log: Path) -> tuple[dict, object]:
    """Start a server and open the Overview in a fresh page; returns the timings and the running server."""
    page = bs.new_page(chromium, timeout=120_000)
    server = bs.start_server(ckpt_dir, model, log, timeout=120, extra_env=env)
    healthy = time.perf_counter()
    try:
        bs.open_app(page, server.url, timeout=120_000)
        errors = bs.alert_texts(page, "Error")
        if errors:
            raise RuntimeError("the app shows an error: " + " | ".join(errors))
        bs.wait_charts(page, timeout=120_000)
        done = time.perf_counter()
    except Exception:
        bs.stop_server(server)
        raise
    finally:
        page.context.close()
    return {"total_s": done - server.started, "until_healthy_s": healthy - server.started,
            "first_page_s": done - healthy}, server


def new_sentence(bs, page, text: str, gen: int) -> float:
    """Type `text`, press Ctrl+Enter; seconds until the Attention view is drawn again for it."""
    page.evaluate(ARM_JS, gen)
    args = {"gen": gen, "runs": bs.runs(page), "oldSource": page.locator("[data-testid='stMain'] h4").first.inner_text()}
    area = bs.widget(page, "text").locator("textarea")
    area.fill(text)
    page.evaluate("() => { window.__atlasT0 = null; }")  # fill() may have pressed nothing, but be sure
    area.press("Control+Enter")
    ms = page.wait_for_function(NEW_SENTENCE_DONE_JS, arg=args, polling="raf", timeout=120_000).json_value()
    return ms / 1000


# What each mode opens (the Attention view) and where its one-head chart is.
MODES = {
    "normal": ({}, "head_fig"),
    "presenter": ({"present": 1, "focus": "one head"}, "head_fig"),
    "compare": ({"compare": "sentence", "text2": "Den Mann beißt der Hund.", "focus": "one head"}, "compare_fig"),
}


def change_layer_or_head(bs, page, key: str, value: int, layer: int, head: int, gen: int, mode: str = "normal") -> float:
    """Pick `value` in the layer or head selectbox; seconds until the single-head chart shows layer/head."""
    bs.widget(page, key).locator("input[role='combobox']").click()
    label = f"{key} {value}" if mode == "presenter" else str(value)  # presenter's boxes say "layer 2"
    option = page.locator("[role='listbox'] [role='option']").get_by_text(label, exact=True)
    option.wait_for(state="visible")
    page.evaluate(ARM_JS, gen)
    args = {"gen": gen, "runs": bs.runs(page), "title": f"layer {layer}, head {head}", "chart": MODES[mode][1]}
    option.click()
    ms = page.wait_for_function(LAYER_HEAD_DONE_JS, arg=args, polling="raf", timeout=60_000).json_value()
    return ms / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--repeats", type=int, default=10, help="new sentences and layer/head changes measured")
    ap.add_argument("--cold-repeats", type=int, default=3, help="fresh servers started for the cold start")
    ap.add_argument("--mode", choices=list(MODES), default="normal",
                    help="the Attention view as is, in presenter mode, or side by side")
    args = ap.parse_args()

    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    from playwright.sync_api import sync_playwright

    sentences = distinct_sentences(args.repeats + 1)
    server = None
    with tempfile.TemporaryDirectory(prefix="bench_app_") as tmp, sync_playwright() as p:
        chromium = bs.launch_chromium(p)  # launched first: the cold start is the server's, not the browser's
        try:
            colds = []
            for i in range(args.cold_repeats):
                if server is not None:
                    bs.stop_server(server)
                cold, server = cold_start(bs, chromium, ckpt_dir, args.model, env, Path(tmp) / f"server{i}.log")
                colds.append(cold)
                print(f"cold start {i + 1}: {cold['total_s']:.2f} s (healthy after {cold['until_healthy_s']:.2f} s)",
                      flush=True)

            page = bs.new_page(chromium, timeout=120_000)
            bs.open_app(page, server.link(view="Attention", **MODES[args.mode][0]), timeout=120_000)
            bs.wait_charts(page, timeout=120_000)
            page.evaluate(INPUT_CLOCK_JS)
            sentence_s = []
            for i, text in enumerate(sentences):
                s = new_sentence(bs, page, text, gen=i + 1)
                if i:  # the first is a warm-up
                    sentence_s.append(s)
            print(f"new sentence: {len(sentence_s)} measured", flush=True)

            cfg = _config(ckpt_dir / args.model)
            layers, heads = cfg["n_decoder_layers"], cfg["n_heads"]  # the default kind is cross-attention
            layer, head = (int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head"))
            switch_s, kinds = [], []
            for i in range(args.repeats + 1):
                if i % 2 == 0 or layers == 1:
                    head = head % heads + 1
                    key, value = "head", head
                else:
                    layer = layer % layers + 1
                    key, value = "layer", layer
                s = change_layer_or_head(bs, page, key, value, layer, head, gen=1000 + i, mode=args.mode)
                if i:
                    switch_s.append(s)
                    kinds.append(key)
            exceptions = page.locator(bs.EXCEPTION).count()
            page.context.close()
        finally:
            if server is not None:
                bs.stop_server(server)
            chromium.close()

    cold = summary([c["total_s"] for c in colds])
    sent = summary(sentence_s)
    sw = summary(switch_s)
    sw_head = summary([s for s, k in zip(switch_s, kinds) if k == "head"])
    sw_layer = summary([s for s, k in zip(switch_s, kinds) if k == "layer"]) if "layer" in kinds else None
    rows = [["cold start (Popen -> Overview drawn)", cold["n"], cold["median_ms"], cold["p10_ms"], cold["p90_ms"],
             cold["min_ms"], cold["max_ms"]],
            ["new sentence (Attention view)", sent["n"], sent["median_ms"], sent["p10_ms"], sent["p90_ms"],
             sent["min_ms"], sent["max_ms"]],
            ["layer/head change (Attention view)", sw["n"], sw["median_ms"], sw["p10_ms"], sw["p90_ms"],
             sw["min_ms"], sw["max_ms"]],
            ["  of which head", sw_head["n"], sw_head["median_ms"], sw_head["p10_ms"], sw_head["p90_ms"],
             sw_head["min_ms"], sw_head["max_ms"]]]
    if sw_layer:
        rows.append(["  of which layer", sw_layer["n"], sw_layer["median_ms"], sw_layer["p10_ms"], sw_layer["p90_ms"],
                     sw_layer["min_ms"], sw_layer["max_ms"]])
    print()
    print(table(rows, ["measure", "n", "median ms", "p10", "p90", "min", "max"]))
    checks = [
        ("cold start, median", f"{cold['median_ms'] / 1000:.2f} s", "<= 6 s", verdict(cold["median_ms"] / 1000, 6.0)),
        ("new sentence, median", f"{sent['median_ms'] / 1000:.2f} s", "<= 1.5 s",
         verdict(sent["median_ms"] / 1000, 1.5)),
        ("layer/head change, median", f"{sw['median_ms'] / 1000:.2f} s", "<= 0.5 s", verdict(sw["median_ms"] / 1000, 0.5)),
    ]
    print()
    print(table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    path = write_results("app" if args.mode == "normal" else f"app_{args.mode}", {
        "benchmark": "app", "mode": args.mode, "checkpoint_dir": str(ckpt_dir), "model": args.model, "repeats": args.repeats,
        "torch_threads": args.torch_threads or 1, "machine": machine(),
        "cold_start": {"runs": colds, **cold}, "new_sentence": {"seconds": sentence_s, **sent},
        "layer_head": {"seconds": switch_s, "changed": kinds, **sw, "head": sw_head, "layer": sw_layer},
        "exceptions_seen": exceptions, "targets": TARGETS,
        "checks": [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks],
        "notes": "Interaction times measured in the page from the key/pointer press to the first frame with the "
                 "run finished and the charts drawn again. Cold starts after the first find the files in the OS cache.",
    })
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


def _config(folder: Path) -> dict:
    import json

    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


if __name__ == "__main__":
    sys.exit(main())
