"""Real-browser tests of the Heads page: it reads a report, computes one in a background job that the page
follows, and links a head to the Attention view (with Back returning); the grid's scale and the pruning curve's
order are in the link and Back undoes them; Decoding shows the step's attribution."""
from __future__ import annotations

import pytest

from browser_support import (
    CHART,
    EXCEPTION,
    MAIN,
    alert_texts,
    chart_titles,
    open_app,
    runs,
    selectbox_value,
    selected_view,
    wait_charts,
    wait_idle,
    wait_new_run,
    wait_texts,
    widget,
)


def assert_no_exception(page) -> None:
    boxes = page.locator(EXCEPTION)
    assert boxes.count() == 0, "the app showed an exception:\n" + "\n---\n".join(boxes.all_inner_texts())


@pytest.mark.browser
def test_heads_page_draws_the_report_and_opens_a_head_in_the_attention_view(page, app_server):
    open_app(page, app_server.link(view="Heads", kind="dec_self", layer=2, head=4, heads_measure="entropy"))
    assert wait_charts(page) == 1  # the grid (one part of the page at a time)
    assert_no_exception(page)
    assert any("every head, coloured by entropy" in t for t in chart_titles(page))
    assert page.locator(MAIN).get_by_text("head_report.json").count() >= 1
    before = runs(page)
    page.get_by_text("one head", exact=True).click()
    wait_new_run(page, before)
    assert wait_charts(page, at_least=2) == 2  # the offset pattern and a corpus sentence's heatmap
    assert any(t.startswith("decoder self L2 H4: mean weight") for t in chart_titles(page)), chart_titles(page)
    assert page.locator(MAIN).get_by_text("decoder self-attention layer 2, head 4", exact=True).count() == 1
    assert "focus=one+head" in page.url
    before = runs(page)
    page.get_by_role("button", name="Open this head in the Attention view").click()
    wait_new_run(page, before)
    wait_charts(page)
    assert selected_view(page) == "Attention"
    assert selectbox_value(page, "kind").startswith("Decoder masked self-attention")
    assert (selectbox_value(page, "layer"), selectbox_value(page, "head")) == ("2", "4")
    assert "view=Attention" in page.url and "layer=2" in page.url and "head=4" in page.url
    wait_texts(page, f"{CHART} .main-svg .gtitle", "layer 2, head 4")  # that head's chart may draw after the first
    assert any("layer 2, head 4" in t for t in chart_titles(page))
    page.go_back()  # Back: the Heads page again, as it was
    page.wait_for_function("() => location.search.includes('view=Heads')", timeout=30_000)
    page.wait_for_selector(f"{CHART} .js-plotly-plot .main-svg", timeout=60_000)
    page.wait_for_function("""() => [...document.querySelectorAll(
            "[data-testid='stSidebar'] [data-testid='stRadioOption'][data-selected='true']")]
        .some(e => e.innerText.trim() === 'Heads')""", timeout=30_000)
    assert selected_view(page) == "Heads"
    assert_no_exception(page)


@pytest.mark.browser
def test_heads_report_computed_from_the_page_in_the_background(page, app_server):
    """The untrained twin has no report: the button starts a server job, the page follows it and then draws it."""
    open_app(page, app_server.link(view="Heads", ckpt="demo:untrained"))
    assert any("no head report" in t and "not these random ones" in t for t in alert_texts(page, "Info"))
    page.get_by_role("button", name="Compute the head report").click()
    # The page polls the job and runs again by itself when it has finished: no click needed.
    page.wait_for_function("""() => [...document.querySelectorAll("[data-testid='stPlotlyChart'] .gtitle")]
        .some(e => e.textContent.includes('every head'))""", timeout=120_000)
    wait_charts(page, 60_000)
    # The findings (with the report's place) are drawn after the parts: wait for them, not only for the grid.
    page.locator(MAIN).get_by_text("demo-untrained").first.wait_for(timeout=60_000)
    wait_idle(page, 60_000)
    assert_no_exception(page)
    cached = app_server.cache / "attention-atlas" / "demo-untrained" / "head_report.json"
    assert cached.is_file()
    assert alert_texts(page, "Error") == []


def click_radio(page, key: str, index: int) -> None:
    before = runs(page)
    widget(page, key).locator("[data-testid='stRadioOption']").nth(index).click()
    wait_new_run(page, before)


def wait_title(page, holds: str, gone: str = "") -> None:
    """Wait until a chart's title holds `holds` and, when `gone` is given, no chart's title holds `gone` any more
    (spaces left out of all: a wrapped title's lines are joined without one). Streamlit keeps the last run's charts
    on the page, faded, until the new run replaces them, so a redraw is only over when the old title is gone."""
    page.wait_for_function("""([s, g]) => {
        const titles = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .gtitle")]
            .map(e => e.textContent.replace(/ /g, ''));
        return titles.some(t => t.includes(s)) && !(g && titles.some(t => t.includes(g)));
    }""", arg=[holds.replace(" ", ""), gone.replace(" ", "")], timeout=30_000)


@pytest.mark.browser
def test_heads_scale_and_pruning_order_are_in_the_link(page, app_server):
    """The tiny model's report has the ablation: the grid shows the loss increase with the agreement line under it;
    the scale and the pruning order are chosen on the page, written into the link, and Back undoes them."""
    open_app(page, app_server.link(view="Heads"))
    wait_charts(page)
    wait_title(page, "every head, coloured by loss increase")
    assert page.locator(MAIN).get_by_text("Agreement with the measured effect").count() >= 1
    assert "heads_scale" not in page.url
    click_radio(page, "heads_scale", 1)
    assert "heads_scale=layer" in page.url
    wait_title(page, "normalised per layer")
    page.get_by_text("pruning", exact=True).click()
    page.wait_for_function("() => location.search.includes('focus=pruning')", timeout=30_000)
    wait_title(page, "pruning heads by measured loss increase")
    click_radio(page, "heads_prune_order", 1)
    assert "heads_prune_order=importance" in page.url
    wait_title(page, "pruning heads by importance")
    page.go_back()  # Back: the curve by the measured loss increase again
    page.wait_for_function("() => !location.search.includes('heads_prune_order')", timeout=30_000)
    wait_title(page, "pruning heads by measured loss increase", gone="pruning heads by importance")
    assert not any(t.startswith("pruning heads by importance") for t in chart_titles(page))
    assert_no_exception(page)


@pytest.mark.browser
def test_decoding_shows_where_the_chosen_step_came_from(page, app_server):
    open_app(page, app_server.link(view="Decoding", dec_step=2, text="Ein Hund läuft im Schnee."))
    wait_charts(page)
    wait_texts(page, f"{CHART} .gtitle", "step 2: attribution of", start=True)  # not the page's first chart
    titles = chart_titles(page)
    assert any(t.startswith("step 2: attribution of") for t in titles), titles
    rows = page.locator(f"{CHART}", has_text="attribution of").locator(".ytick text").all_text_contents()
    assert {"attention rollout", "gradient-weighted relevance", "input × gradient"} <= set(rows), rows
    assert_no_exception(page)
