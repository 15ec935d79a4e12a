"""Real-browser test of the quiz's live poll: a projector at 1280×720 and three phones at 390×844 in one room. The
counts on the projector follow the phones, a changed answer moves one count, no phone shows the answer before
Reveal, and Reveal reaches every phone with the model's values beside the room's share, and the projector too.
On the projector the button's label is whole, the join link is one line, and every figure text is 20 px or more
(the lecture guide's promise; the answers' chart redraws itself, and once lost presenter mode's type doing so)."""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from browser_support import EXCEPTION, MAIN, new_page, open_app
from page_checks import off_the_screen, small_figure_text

SENTENCE = "Ein Hund läuft im Schnee."
LINK = dict(view="Decoding", text=SENTENCE, present=1, focus="quiz", quiz="next", quiz_seed=3, dec_step=2)
PHONE = dict(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, device_scale_factor=3)
BARS_JS = "() => JSON.stringify(Array.from(document.querySelector('.st-key-poll_bars .js-plotly-plot').data[0].x))"
# A text cut by its box: wider inside than the box shows
CUT_JS = "sel => [...document.querySelectorAll(sel)].filter(e => e.scrollWidth > e.clientWidth + 1).length"
# How many lines an inline text takes
LINES_JS = "sel => document.querySelector(sel).getClientRects().length"


def bars(pg) -> list[int]:
    """The projector's bars: students per option, in the options' order."""
    return json.loads(pg.evaluate(BARS_JS))


def wait_bars(pg, want: list[int]) -> None:
    """Wait until the projector's bars read `want` (the fragment redraws them twice a second)."""
    pg.wait_for_function(f"want => {{ try {{ return ({BARS_JS})() === want; }} catch (e) {{ return false; }} }}",
                         arg=json.dumps(want, separators=(",", ":")))


def phone_buttons(ph) -> list:
    return ph.locator("[class*='st-key-room_opt_'] button").all()


@pytest.mark.slow
@pytest.mark.browser
def test_three_phones_vote_the_projector_counts_and_reveal_reaches_every_phone(chromium, app_server):
    projector = new_page(chromium, width=1280, height=720, timeout=60_000)
    contexts = [chromium.new_context(**PHONE) for _ in range(3)]
    try:
        open_app(projector, app_server.link(**LINK))
        assert projector.evaluate(CUT_JS, ".st-key-poll_open button, .st-key-poll_open button p") == 0
        projector.get_by_role("button", name="Let the room vote").click()
        projector.get_by_text("Join:").wait_for()
        assert projector.evaluate(LINES_JS, ".st-key-poll_join code") == 1, "the join link broke over lines"
        assert projector.locator(".st-key-poll_bars").count() or projector.get_by_text("answered").count()
        body = projector.locator(MAIN).inner_text()
        code = "".join(re.search(r"Join:\s*([0-9A-Z]{3})\s*([0-9A-Z]{3})", body).groups())
        projector.locator(f"{MAIN} [data-testid='stImage'] img").first.wait_for()  # the QR code
        # The link gains the presenter's key once the run that opened the room has written it (under load, after the
        # QR code is drawn): wait for it, then check that it is not the room's code.
        projector.wait_for_function("() => new URLSearchParams(location.search).has('poll')", timeout=60_000)
        assert code not in projector.url  # the presenter's key, not the room's code

        phones = []
        for ctx in contexts:
            ph = ctx.new_page()
            ph.set_default_timeout(60_000)
            ph.goto(f"{app_server.url}?room={code.lower()[:3]}-{code.lower()[3:]}")  # typed as heard: still joins
            ph.locator("[class*='st-key-room_opt_'] button").first.wait_for()
            phones.append(ph)
        options = [b.inner_text() for b in phone_buttons(phones[0])]
        assert len(options) >= 2 and all([b.inner_text() for b in phone_buttons(p)] == options for p in phones)
        for ph in phones:  # nothing gives the answer away before Reveal
            text = ph.inner_text("body")
            assert "model's answer" not in text and "p =" not in text and "probability" not in text
            assert ph.locator(EXCEPTION).count() == 0
            assert ph.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")

        for ph, choice in zip(phones, (0, 0, 1)):
            phone_buttons(ph)[choice].tap()
            ph.get_by_text(f"Your answer: {options[choice]}").wait_for()
        projector.get_by_text(re.compile(r"\b3\s+answered")).wait_for()
        projector.get_by_text(re.compile(r"\b3\s+in the room")).wait_for()
        want = [2, 1] + [0] * (len(options) - 2)
        wait_bars(projector, want)

        phone_buttons(phones[2])[0].tap()  # a changed answer moves one count, the total stays
        phones[2].get_by_text(f"Your answer: {options[0]}").wait_for()
        wait_bars(projector, [3, 0] + [0] * (len(options) - 2))
        assert "3 answered" in re.sub(r"\s+", " ", projector.locator(MAIN).inner_text()).replace("*", "")
        assert small_figure_text(projector, 20) == []  # drawn by the chart's own reruns

        projector.locator(".st-key-quiz_reveal button").click()
        projector.get_by_text("Next:").wait_for()
        answer = re.search(r"Next:\s*(\S+)", projector.locator(MAIN).inner_text()).group(1)
        right = 3 if answer == options[0] else 0  # every phone ended on the first option
        projector.get_by_text(f"The room: {right} of 3").wait_for()
        # the room's chart stays, beside the model's: each option's share of the room and the model's probability
        projector.locator(".st-key-room_beside .js-plotly-plot .main-svg").first.wait_for()
        shares = projector.evaluate("() => Array.from(document.querySelector("
                                    "'.st-key-room_beside .js-plotly-plot').data[1].x)")
        assert shares == [1.0, 0.0] + [0.0] * (len(options) - 2)
        assert projector.locator(".st-key-cands").count() == 1  # the model's own chart for the question
        assert small_figure_text(projector, 20) == []
        fit, _ = off_the_screen(projector, 720)
        assert fit == []
        for ph in phones:
            ph.get_by_text(f"The model's answer: {answer}").wait_for()
            # no more answers taken: the reveal's run removes the buttons once it ends (until then they stay, stale)
            expect(ph.locator("[class*='st-key-room_opt_'] button")).to_have_count(0, timeout=60_000)
            ph.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 1")  # room and model
            assert ph.locator(EXCEPTION).count() == 0
    finally:
        for ctx in contexts:
            ctx.close()
        projector.close()
