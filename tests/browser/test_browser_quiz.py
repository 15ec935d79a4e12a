"""Real-browser test of presenter mode's quiz at a projector's 1280×720: a prepared link opens at the question,
the room's guess and Reveal show the answer and the step's charts on one screen, the link says so, and Back asks
again; the lecturer's note stands above the header without moving it."""
from __future__ import annotations

import re
import urllib.parse

import pytest

from browser_support import (
    CHART,
    EXCEPTION,
    MAIN,
    TRANSLATION,
    new_page,
    open_app,
    runs,
    wait_charts,
    wait_new_run,
    widget,
)

SENTENCE = "Ein Hund läuft im Schnee."
WIDTH, HEIGHT = 1280, 720
LINK = dict(view="Decoding", text=SENTENCE, present=1, focus="quiz", quiz="next", quiz_seed=3, dec_step=2)
MAIN_CHART = f"{MAIN} {CHART}"


def query(pg) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query).items()}


def main_text(pg) -> str:
    return pg.locator(MAIN).inner_text()


def click(pg, key: str, text: str | None = None) -> None:
    """Click the widget with key `key` (a button, or the radio option reading `text`) and wait for its run."""
    before = runs(pg)
    target = widget(pg, key)
    (target.get_by_text(text, exact=True) if text else target.locator("button")).click()
    wait_new_run(pg, before)


def history_step(pg, direction: str) -> None:
    before = runs(pg)
    (pg.go_back if direction == "back" else pg.go_forward)(wait_until="commit")
    wait_new_run(pg, before)


@pytest.mark.browser
def test_a_quiz_link_asks_then_reveals_on_one_screen_and_back_asks_again(chromium, app_server):
    pg = new_page(chromium, width=WIDTH, height=HEIGHT, timeout=60_000)
    try:
        open_app(pg, app_server.link(**LINK))
        pg.wait_for_selector(".st-key-quiz_reveal button")
        assert "Which English word comes next?" in main_text(pg)
        assert pg.locator(MAIN_CHART).count() == 0 and "Next:" not in main_text(pg)  # nothing gives it away
        assert "reveal" not in query(pg)
        pick = widget(pg, "quiz_pick_next_2_3")
        # the reveal button can be on the page a frame before the choices' radio is: wait for its options
        pick.locator("[data-testid='stRadioOption']").first.wait_for()
        options = [t.strip() for t in pick.locator("[data-testid='stRadioOption']").all_inner_texts()]
        assert len(options) >= 2
        click(pg, "quiz_pick_next_2_3", options[0])  # the room's guess
        click(pg, "quiz_reveal")
        wait_charts(pg, at_least=2)  # the answer's chart and the step's: both are read below
        said = main_text(pg)
        answer = re.search(r"Next: (\S+) \(p = ([0-9.<]+)\)", said)
        assert answer, said[:500]
        assert f"The room said {options[0]}" in said
        bars = pg.locator(f"{MAIN_CHART} .main-svg").first.inner_html()
        assert f">{answer.group(2)}<" in bars  # the number the candidates chart writes on the bar
        url = query(pg)
        assert (url["reveal"], url["quiz"], url["quiz_seed"], url["dec_step"], url["focus"]) == ("1", "next", "3", "2",
                                                                                              "quiz")
        charts = pg.locator(MAIN_CHART)
        assert charts.count() == 2
        for i in range(2):  # the answer and the step's charts on one projector screen
            box = charts.nth(i).bounding_box()
            assert box["y"] + box["height"] <= HEIGHT + 1, (i, box)
        history_step(pg, "back")
        assert "reveal" not in query(pg)
        pg.wait_for_selector(".st-key-quiz_reveal button")
        assert pg.locator(MAIN_CHART).count() == 0 and "Which English word comes next?" in main_text(pg)
        history_step(pg, "forward")
        assert query(pg)["reveal"] == "1"
        wait_charts(pg)
        assert f"Next: {answer.group(1)}" in main_text(pg)
        assert pg.locator(EXCEPTION).count() == 0
    finally:
        pg.context.close()


@pytest.mark.browser
def test_the_lecturers_note_stands_above_the_header_as_text(chromium, app_server):
    pg = new_page(chromium, width=WIDTH, height=HEIGHT, timeout=60_000)
    note = "Ask first: <b>who</b> thinks “dog”? " + "Then reveal. " * 12
    try:
        tops = []
        for params in ({}, {"note": note}):
            open_app(pg, app_server.link(view="Attention", text=SENTENCE, present=1, focus="one head", **params))
            wait_charts(pg)
            tops.append(pg.locator(TRANSLATION.replace("h3", "h4")).first.bounding_box()["y"])
        pinned = pg.locator(".st-key-lecture_note")
        box = pinned.bounding_box()
        assert "Ask first: <b>who</b> thinks" in pinned.inner_text()  # shown as text, not as markup
        assert pinned.locator("b").count() == 0
        assert box["y"] >= 0 and box["y"] + box["height"] <= tops[1], (box, tops)
        chart = pg.locator(MAIN_CHART).first.bounding_box()
        assert chart["y"] + chart["height"] <= HEIGHT + 1  # the figure gave up the note's height: still on screen
        assert query(pg)["note"] == " ".join(note.split())
    finally:
        pg.context.close()


PAGE_TEXT_JS = """() => [document.body.innerText,
  ...[...document.querySelectorAll('[aria-label], [title], [alt]')].map(e =>
     [e.getAttribute('aria-label'), e.getAttribute('title'), e.getAttribute('alt')].filter(Boolean).join(' '))]
  .join('\\n')"""


@pytest.mark.browser
def test_before_reveal_nothing_on_the_page_gives_the_answer_away(chromium, app_server):
    """The page's text, its elements' accessible names (a chart's text alternative among them) and titles hold
    neither the translation past the asked step's prefix nor a mark of the chosen candidate; Reveal brings both."""
    from model.inference.translator import Translator
    from viz.text import fmt_prob

    res = Translator.from_checkpoint(app_server.checkpoint_dir / "demo").trace(SENTENCE)
    step = res.steps[1]
    later = " ".join(s.chosen_token for s in res.steps[1:3])  # the answer and the word after it, as tokens
    pg = new_page(chromium, width=WIDTH, height=HEIGHT, timeout=60_000)
    try:
        open_app(pg, app_server.link(**LINK))
        pg.wait_for_selector(".st-key-quiz_reveal button")
        header = pg.locator(".st-key-atlas_header_line h4").first
        assert header.inner_text().rstrip().endswith("…")  # the header stops at the prefix the step read
        said = pg.evaluate(PAGE_TEXT_JS)
        assert res.text not in said and later not in said
        assert "Next:" not in said and "Chosen" not in said and f"p = {fmt_prob(step.chosen_prob)}" not in said
        assert pg.locator(MAIN_CHART).count() == 0
        click(pg, "quiz_reveal")
        pg.wait_for_function("t => document.querySelector('.st-key-atlas_header_line h4').innerText.includes(t)",
                             arg=res.text.split()[-1])
        assert res.text in pg.evaluate(PAGE_TEXT_JS)  # revealed: the whole translation is back
    finally:
        pg.context.close()
