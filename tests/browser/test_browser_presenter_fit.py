"""Real-browser test: presenter mode gives the figure the screen, and fits a projector for any sentence.

On every page, in presenter mode:
- a short sentence's heatmaps are whole: with a 9-word and a 20-token sentence at 1280×720 and a 40-token one at
  1920×1080, every heatmap of up to 20 (40) rows or keys shows all of them (no row window) and labels each row and
  each key, a figure of several panels too (as many panels side by side as their labels fit; the others are in
  "Choose"), but for the rows of several panels at 1080 px (_labels); the header holds the whole translation;
- a long sentence (48 words, 100 tokens) still fits: the header takes two lines at most, every chart ends on the
  screen, no text of a figure runs into another or past the figure's edge, and a heatmap's rows are at least
  viz.rows.MIN_ROW_PX tall (a long sentence's rows are a window the reader drags, never squeezed).

The window's size reaches the server after the first drawing (views/plumbing/screen.py): each page is measured once
it has been drawn for the window's own size.
"""
from __future__ import annotations

import pytest
from test_browser_presenter import MAIN_CHART, SETTLED_JS, model_for

from browser_js import LAID_OUT_JS
from browser_support import new_page, open_app
from page_checks import off_the_screen
from presenter_checks import DRAWN_FOR_JS, cut_heatmaps
from tiny_checkpoint import GERMAN

WORDS = " ".join(GERMAN).replace(".", "").split()  # the tiny model's vocabulary, read word by word
# n source tokens: n - 2 words, the full stop and the end token the encoder appends
SENTENCES = {"9 words": " ".join(WORDS[:9]) + ".",
             "20 tokens": " ".join((WORDS * 2)[:18]) + ".",
             "40 tokens": " ".join((WORDS * 2)[:38]) + ".",
             "48 words": " ".join((WORDS * 3)[:48]) + ".",
             "100 tokens": " ".join((WORDS * 5)[:98]) + "."}
CASES = {(1280, 720): ["9 words", "20 tokens", "48 words", "100 tokens"],
         (1920, 1080): ["40 tokens", "48 words", "100 tokens"]}
LIMIT = {720: 20, 1080: 40}  # the rows or keys every heatmap shows whole, at a readable size, on such a screen
WHOLE = {"9 words", "20 tokens", "40 tokens"}
# The parts of a page that presenter mode shows one at a time, beyond each page's first: their heatmaps too.
PARTS = [("Attention", "all heads of the layer"), ("Inside one head", "scores"), ("Masks", "causal mask")]


def _labels(problem: str) -> bool:
    """A 40-token sentence's rows in a figure of several panels at 1080 px: all shown, labelled where 22 px apart
    fit (the stages of the embeddings, Q K V: their titles and dimensions leave the rows 20 px each)."""
    return problem.startswith("multi-panel y labels")


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width,height", list(CASES), ids=[f"{w}x{h}" for w, h in CASES])
def test_every_page_fits_the_screen_for_any_sentence(chromium, app_server, screenshot_dir, width, height):
    from views.plumbing.state import VIEWS

    pg = new_page(chromium, width=width, height=height, timeout=90_000)
    bad, charts = [], 0
    try:
        for name in CASES[(width, height)]:
            pages = [(view, None) for view in VIEWS] + (PARTS if name in WHOLE else [])
            for view, part in pages:
                params = dict(model_for(view), present=1, **({"focus": part} if part else {}))
                if view != "Training":
                    params["text"] = SENTENCES[name]
                open_app(pg, app_server.link(view=view, **params))
                pg.wait_for_function(DRAWN_FOR_JS, timeout=90_000, polling="raf")
                pg.wait_for_function(SETTLED_JS, timeout=90_000, polling="raf")
                pg.wait_for_function(LAID_OUT_JS, arg=MAIN_CHART, timeout=90_000, polling="raf")
                found, n = off_the_screen(pg, height)
                if name in WHOLE:
                    found += [p for p in cut_heatmaps(pg, LIMIT[height]) if height == 720 or not _labels(p)]
                    translation = pg.inner_text(".st-key-atlas_header_line h4").split("→", 1)[-1]
                    if "(+" in translation or translation.rstrip().endswith("…"):
                        found.append(f"the header cuts the translation: {translation!r}")
                charts += n
                where = f"{view}{' · ' + part if part else ''}"
                if found:  # a picture of what failed, for whoever reads the test's output
                    pg.screenshot(path=screenshot_dir / f"presenter_fit_{width}_{where}_{name}.png".replace(" ", "_"))
                bad += [f"{name}, {where}: {what}" for what in found]
    finally:
        pg.context.close()
    assert bad == [], f"at {width}×{height}:\n" + "\n".join(bad[:40])
    assert charts >= len(VIEWS)  # the pages drew their figures (one part of each page; a part may be a table)
