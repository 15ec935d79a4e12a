"""The app by keyboard alone: Tab and Shift+Tab reach every control with a visible focus ring; arrow keys change
the view in the sidebar's radio, a select box's option and a slider's value; Enter chooses the option and opens
the sidebar's options; Space opens a figure's text description. Each change shows in the link.

No mouse event is sent: every step is a key press (page.keyboard), and the checks read the page and its URL.
"""
from __future__ import annotations

import urllib.parse

import pytest

from axe_support import settle
from browser_support import open_app, runs, wait_new_run

# What has the focus: its control's key (Streamlit's st-key-KEY class), its text, and whether the focus shows: the
# browser matches :focus-visible and draws an outline at least 2 px wide (the app's ring, PAGE_CSS in
# views/plumbing/streamlit_internals.py).
FOCUS_JS = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const s = getComputedStyle(e), box = e.closest('[class*="st-key-"]');
  return {tag: e.tagName, role: e.getAttribute('role'),
          text: (e.innerText || e.getAttribute('aria-label') || '').trim(),
          key: box ? [...box.classList].find(c => c.startsWith('st-key-')).slice(7) : null,
          visible: e.matches(':focus-visible') && s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2};
}"""


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query).items()}


def move_focus(page, found, key: str = "Tab", limit: int = 80) -> list[dict]:
    """Press `key` until the focused element satisfies `found`; returns every element the focus stopped on."""
    stops = []
    for _ in range(limit):
        page.keyboard.press(key)
        focus = page.evaluate(FOCUS_JS)
        stops.append(focus)
        if focus and found(focus):
            return stops
    seen = [s and (s["key"], s["text"][:30]) for s in stops]
    raise AssertionError(f"{key} never reached the control; it stopped on {seen}")


def press_and_wait(page, key: str) -> None:
    """Press `key` and wait for the script run it starts."""
    before = runs(page)
    page.keyboard.press(key)
    wait_new_run(page, before)
    settle(page)


def assert_visible(stops: list[dict]) -> None:
    hidden = [(s["tag"], s["key"], s["text"][:40]) for s in stops if s and not s["visible"]]
    assert not hidden, f"focus not visible on {hidden}"


@pytest.mark.slow
@pytest.mark.browser
def test_the_app_by_keyboard_alone(page, app_server):
    open_app(page, app_server.link(view="Overview"))
    settle(page)

    # Tab to the sidebar's View radio; arrows move through the views, and each is a new page and a new link.
    assert_visible(move_focus(page, lambda f: f["key"] == "view"))
    for view in ("Embeddings", "Positional encoding", "Attention"):
        press_and_wait(page, "ArrowDown")
        assert query(page)["view"] == view
        assert page.evaluate(FOCUS_JS)["key"] == "view", "the focus left the radio when the page changed"

    # On to the page's attention-kind select box: an arrow opens it, another moves, Enter chooses.
    assert_visible(move_focus(page, lambda f: f["key"] == "kind"))
    old = query(page).get("kind")
    page.keyboard.press("ArrowDown")
    page.locator("[role='listbox']").wait_for()
    page.keyboard.press("ArrowUp")  # the option above the chosen one (cross-attention, the default, is the last)
    press_and_wait(page, "Enter")
    assert query(page).get("kind") != old, "choosing another kind by keyboard did not change it"

    # A figure's text description: Space opens it, and it is drawn.
    assert_visible(move_focus(page, lambda f: f["tag"] == "SUMMARY" and "Text description" in f["text"]))
    press_and_wait(page, "Space")
    details = page.locator("[data-testid='stExpander']").filter(has_text="Text description and numbers").first
    assert "For each query" in details.inner_text()

    # Back to the sidebar with Shift+Tab: Enter opens "Decoding options", Tab reaches its slider, an arrow moves it.
    assert_visible(move_focus(page, lambda f: f["tag"] == "SUMMARY" and "Decoding options" in f["text"], "Shift+Tab",
                              limit=200))
    page.keyboard.press("Enter")
    assert_visible(move_focus(page, lambda f: f["key"] == "max_len"))
    press_and_wait(page, "ArrowRight")
    assert query(page).get("max_len") == "1"


# The option of a radio that holds the focus (its input is clipped to 1 px, so the option shows the focus): its
# computed outline and box shadow, and the size of the box that clips the input (what of the input can show).
OPTION_RING_JS = """() => {
  const input = document.activeElement, option = input && input.closest("[data-testid='stRadioOption']");
  if (!option) return null;
  const s = getComputedStyle(option), r = input.parentElement.getBoundingClientRect();
  return {text: option.innerText.trim(), outline: s.outlineStyle, width: parseFloat(s.outlineWidth),
          colour: s.outlineColor, shadow: s.boxShadow, input_px: Math.max(r.width, r.height)};
}"""


@pytest.mark.browser
def test_the_view_list_shows_the_apps_focus_ring_on_the_focused_option(page, app_server):
    """Tab to the View list: the focused option wears the 3 px ring every other control wears, not only
    Streamlit's faint grey background (the radio input itself is too small to show a ring)."""
    open_app(page, app_server.link(view="Overview"))
    settle(page)
    move_focus(page, lambda f: f["key"] == "view")
    for step in range(2):
        ring = page.evaluate(OPTION_RING_JS)
        assert ring is not None, "the focus is not on an option of the View list"
        assert ring["input_px"] <= 2, ring  # why the option, not the input, must show the ring
        assert ring["outline"] == "solid" and ring["width"] == pytest.approx(3.0), ring
        assert ring["colour"] == "rgb(29, 78, 216)", ring  # the app's ring colour, #1d4ed8
        if not step:
            press_and_wait(page, "ArrowDown")  # the next view: its option has the focus and the ring
            assert page.evaluate(OPTION_RING_JS)["text"] == "Embeddings"
