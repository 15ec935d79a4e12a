"""Screenshots of every view on the shipped model, for the README.

    python docs/make_screenshots.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--only NAME ...]
    python docs/make_screenshots.py --only film_strip [--strip-frames 1 7 0] [--strip-layer 2]
    python docs/make_screenshots.py --only every_page

Starts `streamlit run app.py`, opens each view in Debian's Chromium (Playwright) through a shareable
link, waits until every chart is drawn, and writes docs/screenshots/<view>.png.

`film_strip` is the README's frame strip of the training film: the Training page at three frames
(1-based; 0 is the last), each the step line, the translation at that step and the heatmaps of every head of
one decoder layer's cross-attention (`--strip-layer`) for the first probe sentence, cut from the page as the browser
drew them and put one above the other into docs/screenshots/film_strip.png.

`every_page` is every view twice, with a 9-word sentence: in presenter mode on a 1280×720 projector (what the screen
shows: docs/screenshots/pages/presenter_<view>.png) and on a 390×844 phone (the whole page, at most 3,000 px:
pages/phone_<view>.png).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import browser_support as bs  # noqa: E402

SENTENCE = "Ein brauner Hund rennt dem schwarzen Hund hinterher."
LONG = ("Ein älterer Mann mit einem roten Hut und einer blauen Jacke steht am Rand einer belebten Straße in der Stadt, "
        "während zwei kleine Kinder neben ihm auf einer Bank sitzen, Eis essen und den vielen Autos, Fahrrädern und "
        "Menschen zusehen, die an einem sonnigen Nachmittag im Sommer an ihnen vorbeigehen.")  # 48 words
LAB_PAIR = {"text": "Ein brauner Hund rennt im Schnee.", "pair": "Ein schwarzer Hund rennt im Schnee."}
SHOTS = {  # file name -> query parameters
    "overview": {"view": "Overview"},
    "embeddings": {"view": "Embeddings"},
    "positional_encoding": {"view": "Positional encoding"},
    "attention_cross": {"view": "Attention", "kind": "cross", "layer": 2, "head": 1},
    "attention_encoder": {"view": "Attention", "kind": "enc_self", "layer": 1, "head": 1},
    "inside_one_head": {"view": "Inside one head", "kind": "dec_self", "layer": 1, "head": 1},
    "masks": {"view": "Masks"},
    "decoding": {"view": "Decoding"},
    "decoding_beam": {"view": "Decoding", "decoding": "beam", "dec_step": 3},
    "decoding_attribution": {"view": "Decoding", "dec_step": 3, "focus": "where it came from"},
    "heads": {"view": "Heads", "kind": "cross", "layer": 2, "head": 1},
    "heads_one_head": {"view": "Heads", "focus": "one head", "kind": "enc_self", "layer": 3, "head": 3},
    "heads_pruning": {"view": "Heads", "focus": "pruning"},
    "decoding_untrained": {"view": "Decoding", "ckpt": "multi30k-de-en:untrained", "max_len": 20},
    "masks_untrained": {"view": "Masks", "ckpt": "multi30k-de-en:untrained"},
    # the lecture kit: what a projector at 1280×720 shows (one screen, no scrolling), and side by side
    "presenter_attention": {"view": "Attention", "present": 1, "focus": "one head", "kind": "cross", "layer": 2},
    "presenter_heads_contrast": {"view": "Attention", "present": 1, "focus": "all heads of the layer", "kind": "cross",
                                 "layer": 2, "contrast": 1},
    "side_by_side_sentences": {"view": "Attention", "compare": "sentence", "text": "Der Hund beißt den Mann.",
                               "text2": "Den Mann beißt der Hund.", "kind": "cross", "layer": 2,
                               "focus": "all heads of the layer"},
    "side_by_side_models": {"view": "Decoding", "compare": "model", "ckpt2": "multi30k-de-en:untrained", "dec_step": 2},
    # presenter mode with a 48-word sentence: a one-line header, rows as a window of readable height
    "presenter_attention_long": {"view": "Attention", "present": 1, "focus": "all heads of the layer",
                                 "kind": "cross", "layer": 2, "text": LONG},
    "presenter_heads_long": {"view": "Heads", "present": 1, "text": LONG},
    # presenter mode's quiz: the question as the room sees it (with a lecturer's note), then its answer revealed
    "presenter_quiz": {"view": "Decoding", "present": 1, "focus": "quiz", "quiz": "next", "dec_step": 3,
                       "note": "Hands up: which word comes next? Then ask where the step looks."},
    "presenter_quiz_reveal": {"view": "Decoding", "present": 1, "focus": "quiz", "quiz": "looks", "dec_step": 3,
                              "reveal": 1},
    # the what-if lab: the whole page, then each experiment as a projector shows it
    "what_if": {"view": "What if", **LAB_PAIR, "kind": "cross", "layer": 2, "head": 1, "lab_patch": 1},
    "what_if_pair": {"view": "What if", **LAB_PAIR, "present": 1, "focus": "A and B", "kind": "cross", "layer": 2},
    "what_if_knockout": {"view": "What if", **LAB_PAIR, "present": 1, "focus": "knockout"},
    "what_if_patching": {"view": "What if", **LAB_PAIR, "present": 1, "focus": "patching: positions"},
    "decoding_lens": {"view": "Decoding", "text": LAB_PAIR["text"], "dec_step": 2, "present": 1, "focus": "logit lens"},
    "decoding_why": {"view": "Decoding", "text": LAB_PAIR["text"], "dec_step": 2, "present": 1,
                     "focus": "why A and not B"},
}
STRIP = {"view": "Training", "kind": "cross", "film_probe": 1}  # + layer (the last) and film_frame
SCREEN = {name: (1280, 720) for name in ("presenter_attention", "presenter_heads_contrast", "presenter_quiz",
                                         "presenter_attention_long", "presenter_heads_long",
                                         "presenter_quiz_reveal", "what_if_pair", "what_if_knockout",
                                         "what_if_patching", "decoding_lens", "decoding_why")}  # the screen only
WAIT_FOR = {"presenter_quiz": ".st-key-quiz_reveal button"}  # pages with no chart: what shows they are drawn


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--only", nargs="*", choices=list(SHOTS) + ["film_strip", "poll", "every_page"],
                    help="take only these screenshots")
    ap.add_argument("--strip-frames", nargs=3, type=int, default=[1, 7, 0],
                    help="the film strip's early, middle and final frame (1-based; 0: the last)")
    ap.add_argument("--strip-layer", type=int, default=2, help="the film strip's decoder layer (1-based)")
    args = ap.parse_args()
    missing = bs.chromium_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rooms = tempfile.mkdtemp(prefix="atlas-shots-rooms-")  # the live poll's rooms: not the user's cache
    server = bs.start_server(args.checkpoint_dir, args.model, Path(tempfile.gettempdir()) / "atlas-shots.log",
                             extra_env={"ATLAS_ROOM_DIR": rooms})
    try:
        with sync_playwright() as p:
            browser = bs.launch_chromium(p)
            if not args.only or "film_strip" in args.only:
                print(film_strip(browser, server, out / "film_strip.png", args.strip_frames, args.strip_layer))
            if not args.only or "poll" in args.only:
                print(*poll_shots(browser, server, out), sep="\n")
            if not args.only or "every_page" in args.only:
                print(*page_shots(browser, server, out / "pages"), sep="\n")
            for name, params in SHOTS.items():
                if args.only and name not in args.only:
                    continue
                width, height = SCREEN.get(name, (1500, 1000))
                page = bs.new_page(browser, width=width, height=height)
                url = server.link(**{"text": SENTENCE, **params})
                bs.open_app(page, url)
                if name in WAIT_FOR:
                    page.wait_for_selector(WAIT_FOR[name])
                else:
                    bs.wait_charts(page)
                if page.locator(bs.EXCEPTION).count():
                    raise SystemExit(f"{name}: the app showed an exception")
                if name in SCREEN:
                    path = out / f"{name}.png"
                    page.screenshot(path=str(path))
                else:
                    path = bs.full_screenshot(page, out / f"{name}.png", max_height=5000)
                print(path)
                page.context.close()
            browser.close()
    finally:
        bs.stop_server(server)
    return 0


def film_strip(browser, server, path: Path, frames: list[int], layer: int) -> Path:
    """The Training page's frame line and head heatmaps at each frame, side by side in one PNG."""
    from io import BytesIO

    from PIL import Image

    panels = []
    for frame in frames:
        page = bs.new_page(browser, width=1500, height=2400)
        bs.open_app(page, server.link(text=SENTENCE, **STRIP, layer=layer, film_frame=frame))
        bs.wait_charts(page)
        if page.locator(bs.EXCEPTION).count():
            raise SystemExit(f"film strip, frame {frame}: the app showed an exception")
        chart = bs.widget(page, "film_heads")
        line = page.locator("[data-testid='stMarkdownContainer']", has_text="· translation:").first  # "Step N …"
        line.scroll_into_view_if_needed()  # Streamlit scrolls its own container, not the document
        top, bottom = line.bounding_box(), chart.bounding_box()  # viewport coordinates
        clip = {"x": bottom["x"], "y": top["y"], "width": bottom["width"],
                "height": bottom["y"] + bottom["height"] - top["y"]}
        panels.append(Image.open(BytesIO(page.screenshot(clip=clip))).convert("RGB"))
        page.context.close()
    gap = 24  # one panel above the other: side by side, the heads' axis labels would not fit
    strip = Image.new("RGB", (max(p.width for p in panels), sum(p.height for p in panels) + gap * (len(panels) - 1)),
                      "white")
    y = 0
    for p in panels:
        strip.paste(p, (0, y))
        y += p.height + gap
    strip.save(path)
    return path



NINE_WORDS = "Ein Mann mit einem orangen Hut starrt auf etwas."


def page_shots(browser, server, out: Path) -> list[Path]:
    """Every view in presenter mode at 1280×720 (the screen) and on a phone (the page), with a 9-word sentence."""
    sys.path.insert(0, str(ROOT))
    from browser_js import RUN_COUNTER_JS
    from model.records import VIEWS
    from page_checks import PHONE as PHONE_CONTEXT

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for where in ("presenter", "phone"):
        for view in VIEWS:
            if where == "presenter":
                page = bs.new_page(browser, width=1280, height=720)
            else:
                context = browser.new_context(**dict(PHONE_CONTEXT, device_scale_factor=2))
                context.add_init_script(RUN_COUNTER_JS)
                page = context.new_page()
                page.set_default_timeout(90_000)
            bs.open_app(page, server.link(text=NINE_WORDS, view=view, **({"present": 1} if where == "presenter"
                                                                           else {})))
            if page.locator(bs.CHART).count():  # a presenter page's first part may be a table
                bs.wait_charts(page, 90_000)
            if page.locator(bs.EXCEPTION).count():
                raise SystemExit(f"{where}, {view}: the app showed an exception")
            path = out / f"{where}_{view.lower().replace(' ', '_')}.png"
            if where == "presenter":
                page.wait_for_function("() => (document.querySelector('.atlas-screen') || {}).dataset?.drawn "
                                       "=== '1280x720'")
                page.screenshot(path=str(path))
            else:
                bs.full_screenshot(page, path, max_height=3000)
            paths.append(path)
            page.context.close()
    return paths


POLL = {"view": "Decoding", "present": 1, "focus": "quiz", "quiz": "next", "dec_step": 3}
PHONE = dict(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, device_scale_factor=2)


def poll_shots(browser, server, out: Path) -> list[Path]:
    """The live poll: the projector (1280×720) with the join code, the QR code and the room's answers after three
    phones voted, and one phone (390×844) before and after Reveal."""
    import re

    projector = bs.new_page(browser, width=1280, height=720)
    bs.open_app(projector, server.link(text=SENTENCE, **POLL))
    projector.get_by_role("button", name="Let the room vote").click()
    projector.get_by_text("Join:").wait_for()
    code = "".join(re.search(r"Join:\s*([0-9A-Z]{3})\s*([0-9A-Z]{3})", projector.inner_text("body")).groups())
    phones = [browser.new_context(**PHONE).new_page() for _ in range(3)]
    for ph, choice in zip(phones, (0, 0, 1)):
        ph.set_default_timeout(60_000)
        ph.goto(f"{server.url}?room={code}")
        buttons = ph.locator("[class*='st-key-room_opt_'] button")
        buttons.first.wait_for()
        buttons.nth(choice).tap()
        ph.get_by_text("Your answer").wait_for()
    projector.get_by_text(re.compile(r"\b3\s+answered")).wait_for()
    projector.wait_for_function("() => document.querySelector('.st-key-poll_bars .js-plotly-plot .main-svg')")
    paths = [out / "presenter_poll.png", out / "phone_poll_question.png", out / "phone_poll_reveal.png"]
    projector.screenshot(path=str(paths[0]))
    phones[0].screenshot(path=str(paths[1]))
    projector.locator(".st-key-quiz_reveal button").click()
    phones[0].get_by_text("The model's answer").wait_for()
    phones[0].wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 1 "
                                "&& document.querySelector('.js-plotly-plot .main-svg')")
    phones[0].screenshot(path=str(paths[2]), full_page=True)
    for pg in phones + [projector]:
        if pg.locator(bs.EXCEPTION).count():
            raise SystemExit("live poll: the app showed an exception")
        pg.context.close()
    return paths


if __name__ == "__main__":
    sys.exit(main())
