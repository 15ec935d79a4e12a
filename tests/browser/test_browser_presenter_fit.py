"""Real-browser test: presenter mode fits a projector for any sentence up to the reading limit.

At 1280×720 and 1920×1080, for a 6-word (1920×1080 only; 1280×720: the presenter tour), a 48-word and a 100-token
sentence, on every page: the header takes two lines at most,
every chart ends on the screen, no text of a figure runs into another or past the figure's edge, and a heatmap's
rows are at least viz.rows.MIN_ROW_PX tall (a long sentence's rows are a window the reader drags, never squeezed).
"""
from __future__ import annotations

import pytest
from test_browser_presenter import MAIN_CHART, SETTLED_JS, model_for

from browser_js import LAID_OUT_JS
from browser_support import new_page, open_app
from page_checks import off_the_screen
from tiny_checkpoint import GERMAN

SIZES = [(1280, 720), (1920, 1080)]
WORDS = " ".join(GERMAN).replace(".", "").split()  # the tiny model's vocabulary, read word by word
# A short sentence at 1280×720: the presenter tour (test_browser_tour.py, C8 and C10, an 11-word sentence).
SENTENCES = {"6 words": " ".join(WORDS[:6]) + ".",
             "48 words": " ".join((WORDS * 3)[:48]) + ".",
             "100 tokens": " ".join((WORDS * 5)[:99]) + "."}  # 99 words and the full stop
TOURED = {(1280, "6 words")}


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width,height", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_page_fits_the_screen_for_any_sentence(chromium, app_server, screenshot_dir, width, height):
    from views.plumbing.state import VIEWS

    pg = new_page(chromium, width=width, height=height, timeout=90_000)
    bad, charts = [], 0
    try:
        for name, sentence in SENTENCES.items():
            if (width, name) in TOURED:
                continue
            for view in VIEWS:
                params = dict(model_for(view), text=sentence) if view != "Training" else model_for(view)
                open_app(pg, app_server.link(view=view, present=1, **params))
                pg.wait_for_function(SETTLED_JS, timeout=90_000, polling="raf")
                pg.wait_for_function(LAID_OUT_JS, arg=MAIN_CHART, timeout=90_000, polling="raf")
                found, n = off_the_screen(pg, height)
                charts += n
                if found:  # a picture of what failed, for whoever reads the test's output
                    pg.screenshot(path=screenshot_dir / f"presenter_fit_{width}_{view}_{name}.png".replace(" ", "_"))
                bad += [f"{name}, {view}: {what}" for what in found]
    finally:
        pg.context.close()
    assert bad == [], f"at {width}×{height}:\n" + "\n".join(bad[:40])
    assert charts >= len(VIEWS)  # the pages drew their figures (one part of each page; a part may be a table)
