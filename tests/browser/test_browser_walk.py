"""A walk through every page: change a control on each, then visit every other page. Nothing breaks, every
control is as the user left it, and the link and the Back button follow every change."""
from __future__ import annotations

import urllib.parse

import pytest

from browser_support import (
    EXCEPTION,
    choose_view,
    open_app,
    runs,
    select_option,
    selectbox_value,
    wait_charts,
    wait_idle,
    wait_new_run,
    widget,
)
from model import records

SENTENCE = "Ein Mann fährt Fahrrad."


def query(pg) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query).items()}


def exceptions(pg) -> list[str]:
    return pg.locator(EXCEPTION).all_inner_texts()


def click_radio(pg, key: str, index: int) -> None:
    """Pick the radio's option number `index` (0-based; their labels carry the model's words and numbers)."""
    before = runs(pg)
    widget(pg, key).locator("[data-testid='stRadioOption']").nth(index).click()
    wait_new_run(pg, before)


def nudge_slider(pg, key: str, presses: int = 1, direction: str = "ArrowRight") -> None:
    """Move a slider by the keyboard (as a user without a mouse would): focus its thumb, press an arrow."""
    before = runs(pg)
    thumb = widget(pg, key).locator("input[type='range']").first
    thumb.focus()
    for _ in range(presses):
        thumb.press(direction)
    wait_new_run(pg, before)


def select_index(pg, key: str, index: int) -> None:
    """Pick the select box's option number `index` (0-based)."""
    before = runs(pg)
    widget(pg, key).locator("input[role='combobox']").click()
    pg.locator("[role='listbox'] [role='option']").nth(index).click()
    wait_new_run(pg, before)


def radio_index(pg, key: str) -> int:
    options = widget(pg, key).locator("[data-testid='stRadioOption']")
    return [options.nth(i).get_attribute("data-selected") for i in range(options.count())].index("true")


def slider_value(pg, key: str) -> str:
    """What the slider says it shows (a select slider's option label, a number slider's number)."""
    return widget(pg, key).locator("input[type='range']").first.get_attribute("aria-valuetext")


def history(pg, direction: str) -> None:
    before = runs(pg)
    (pg.go_back if direction == "back" else pg.go_forward)(wait_until="commit")
    wait_new_run(pg, before)


# (view, how to change its control, URL parameter, its new value in the URL, how to read the control back)
CHANGES = [
    ("Embeddings", lambda pg: click_radio(pg, "emb_side", 1), "emb_side", "tgt",
     lambda pg: radio_index(pg, "emb_side") == 1),
    ("Positional encoding", lambda pg: nudge_slider(pg, "pe_positions"), "pe_positions", "51",
     lambda pg: slider_value(pg, "pe_positions") == "51"),
    ("Attention", lambda pg: select_option(pg, "kind", "Encoder self-attention (DE → DE)"), "kind", "enc_self",
     lambda pg: selectbox_value(pg, "kind") == "Encoder self-attention (DE → DE)"),
    ("Inside one head", lambda pg: select_option(pg, "head", "3"), "head", "3",
     lambda pg: selectbox_value(pg, "head") == "3"),
    ("Masks", lambda pg: select_option(pg, "pad_layer", "2"), "pad_layer", "2",
     lambda pg: selectbox_value(pg, "pad_layer") == "2"),
    ("Decoding", lambda pg: nudge_slider(pg, "dec_step", 1), "dec_step", "2",
     lambda pg: slider_value(pg, "dec_step") == "2"),
    ("What if", lambda pg: select_index(pg, "lab_token", 1), "lab_token", "1",
     lambda pg: selectbox_value(pg, "lab_token").startswith("output token 1")),
    ("Heads", lambda pg: select_index(pg, "heads_measure", 1), "heads_measure", "importance",
     lambda pg: selectbox_value(pg, "heads_measure").startswith("importance")),
    ("Training", lambda pg: click_radio(pg, "toy_task", 1), "toy_task", "reverse",
     lambda pg: radio_index(pg, "toy_task") == 1),
]
VIEWS = list(records.VIEWS)


@pytest.mark.slow
@pytest.mark.browser
def test_a_control_changed_on_every_page_survives_a_visit_to_every_other(page, app_server):
    open_app(page, app_server.link(view="Overview", text=SENTENCE))
    wait_charts(page)
    wanted: dict[str, str] = {}
    for view, change, param, value, _ in CHANGES:
        choose_view(page, view)
        assert exceptions(page) == [], f"{view}, on arrival: {exceptions(page)[:1]}"
        change(page)
        assert exceptions(page) == [], f"{view}, after the change: {exceptions(page)[:1]}"
        wanted[param] = value
        assert {p: query(page).get(p) for p in wanted} == wanted, f"after changing {param} on {view}"
    for view in VIEWS:  # every page again: nothing breaks, nothing was forgotten
        choose_view(page, view)
        wait_idle(page)
        assert exceptions(page) == [], f"{view}, on the second visit: {exceptions(page)[:1]}"
        assert {p: query(page).get(p) for p in wanted} == wanted, f"{view}: the link lost a choice"
        for v, _, param, _, shows in CHANGES:
            if v == view:
                assert shows(page), f"{view}: {param} is not as the user left it"


@pytest.mark.slow
@pytest.mark.browser
def test_back_and_forward_follow_a_change_on_every_page(page, app_server):
    open_app(page, app_server.link(view="Overview", text=SENTENCE))
    wait_charts(page)
    for view, change, param, value, shows in CHANGES:
        choose_view(page, view)
        old = query(page).get(param)
        change(page)
        assert query(page).get(param) == value, f"{view}: {param} not in the link"
        history(page, "back")  # Back undoes exactly this change
        assert query(page).get(param) == old and query(page)["view"] == view, f"{view}: Back"
        assert not shows(page), f"{view}: Back left the control at the new value"
        history(page, "forward")  # Forward brings it again
        assert query(page).get(param) == value and shows(page), f"{view}: Forward"
        assert exceptions(page) == [], f"{view}: {exceptions(page)[:1]}"


@pytest.mark.slow
@pytest.mark.browser
def test_the_film_frame_is_in_the_link_survives_a_visit_and_back_follows_it(page, app_server):
    open_app(page, app_server.link(view="Training", ckpt="filmed", text=SENTENCE))
    wait_idle(page)
    last, first = slider_value(page, "film_frame"), query(page).get("film_frame")  # the last frame
    nudge_slider(page, "film_frame", direction="ArrowLeft")  # one frame earlier
    earlier = slider_value(page, "film_frame")
    frame = query(page).get("film_frame")
    assert earlier != last and frame not in (None, first), "the chosen frame is not in the link"
    choose_view(page, "Attention")
    choose_view(page, "Training")
    assert slider_value(page, "film_frame") == earlier and query(page).get("film_frame") == frame
    assert exceptions(page) == []
    history(page, "back")  # Training -> Attention
    history(page, "back")  # Attention -> Training at the chosen frame
    history(page, "back")  # the frame change undone: the last frame again
    assert slider_value(page, "film_frame") == last and query(page).get("film_frame") == first
    open_app(page, app_server.link(view="Training", ckpt="filmed", text=SENTENCE, film_frame=frame))  # a copied link
    assert slider_value(page, "film_frame") == earlier
