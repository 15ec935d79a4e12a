"""Real-browser tests: Debian's Chromium, driven by Playwright, against `streamlit run app.py`.

One server (serving a tiny model built for the session) and one browser serve every test; each
test opens its own page, so its own Streamlit session. Run only these with `pytest -m browser`.
Every view in every mode is opened, checked and saved as a screenshot by tests/browser/test_browser_tour.py.
"""
from __future__ import annotations

import shutil
import urllib.parse

import pytest

from browser_support import (
    CHART,
    EXCEPTION,
    MAIN,
    TRANSLATION,
    alert_texts,
    chart_titles,
    choose_view,
    enter_text,
    new_page,
    open_app,
    selectbox_value,
    selected_view,
    start_test_server,
    stop_server,
    wait_charts,
    wait_texts,
    widget,
)

SENTENCE = "Zwei Hunde spielen im Schnee mit einem Spielzeug."
SOURCE_LINE = f"{MAIN} h4"  # the first one is the "#### DE tokens" line above every view


def assert_no_exception(page) -> None:
    boxes = page.locator(EXCEPTION)
    assert boxes.count() == 0, "the app showed an exception:\n" + "\n---\n".join(boxes.all_inner_texts())


@pytest.fixture(scope="module")
def sentence_page(chromium, app_server):
    """One page (a fresh Streamlit session) with SENTENCE typed into the sidebar."""
    pg = new_page(chromium)
    open_app(pg, app_server.url)
    enter_text(pg, SENTENCE)
    yield pg
    pg.context.close()


@pytest.mark.browser
def test_typed_sentence_is_translated(sentence_page):
    pg = sentence_page
    assert widget(pg, "text").locator("textarea").input_value() == SENTENCE
    assert "Zwei Hunde spielen im Schnee" in pg.locator(SOURCE_LINE).first.inner_text()
    translation = pg.locator(TRANSLATION).first.inner_text().strip()
    assert len(translation) > 5 and "empty output" not in translation, translation
    assert "text=" + urllib.parse.quote_plus(SENTENCE) in pg.url  # the URL follows the state: a shareable link
    assert_no_exception(pg)


@pytest.mark.browser
def test_link_opens_the_view_layer_head_and_kind_it_names(page, app_server):
    text = "Ein Mann schläft auf einem Sofa."
    open_app(page, app_server.link(view="Attention", layer=2, head=3, kind="enc_self", text=text))
    wait_charts(page)
    assert selected_view(page) == "Attention"
    assert selectbox_value(page, "kind") == "Encoder self-attention (DE → DE)"
    assert selectbox_value(page, "layer") == "2"
    assert selectbox_value(page, "head") == "3"
    assert widget(page, "text").locator("textarea").input_value() == text
    assert "Ein Mann schläft auf einem Sofa" in page.locator(SOURCE_LINE).first.inner_text()
    wait_texts(page, f"{CHART} .main-svg .gtitle", "layer 2, head 3")  # that head's chart may draw after the first
    titles = chart_titles(page)
    assert any("layer 2, head 3" in t for t in titles), titles
    assert page.locator(MAIN).get_by_text("layer 2 of 2").count() == 1
    assert_no_exception(page)


@pytest.mark.browser
def test_markup_in_the_sentence_is_shown_as_text_never_run(page, app_server):
    markup = "<script>window.__pwned=1</script><b>fett</b>"
    open_app(page, app_server.url)
    enter_text(page, markup)
    wait_charts(page)
    assert page.evaluate("() => window.__pwned") is None  # undefined: the script never ran
    assert page.locator("[data-testid='stApp'] b", has_text="fett").count() == 0
    assert page.locator("[data-testid='stApp'] script", has_text="__pwned").count() == 0
    shown = page.locator(SOURCE_LINE).filter(has_text="fett").first.inner_text()
    assert "".join(shown.split()).endswith(markup), shown  # the tokens, joined: every character, literally
    assert widget(page, "text").locator("textarea").input_value() == markup
    assert_no_exception(page)


@pytest.mark.browser
@pytest.mark.parametrize("text", ["", "   \n  "])
def test_empty_input_asks_for_a_sentence(page, app_server, text):
    open_app(page, app_server.link(text="Ein Hund läuft im Schnee."))
    wait_charts(page)  # the page is fully drawn, so clearing the text is a change that starts a run
    enter_text(page, text)
    infos = alert_texts(page, "Info")
    assert any("Type a German sentence" in t for t in infos), infos
    assert page.locator(CHART).count() == 0
    assert_no_exception(page)


@pytest.mark.browser
def test_first_run_starts_loading_plotly_and_leaves_no_trace_of_it(chromium, atlas_checkpoints, tmp_path_factory):
    """A fresh server's first run asks the browser for Plotly's code before it imports torch (views/plumbing/warmup.py),
    even on a page without a chart, and for the code of the first page's metric and download buttons. The hidden
    warm-up elements are gone when each run ends. The pages' tables are Markdown, so neither st.table's code nor
    st.dataframe's canvas grid is asked for, on the first run or the next (a page with tables). A server of its
    own: on a warm server a first run can end before the browser draws the warm-up chart, and then there is
    nothing to overlap anyway."""
    server = start_test_server(atlas_checkpoints, "demo", tmp_path_factory)
    pg = new_page(chromium)
    scripts = []
    pg.on("request", lambda r: scripts.append(r.url.rsplit("/", 1)[-1]) if r.url.endswith(".js") else None)
    try:
        open_app(pg, server.link(view="Training", text=SENTENCE))  # the demo model has no film: no chart
        assert selected_view(pg) == "Training"
        pg.locator(MAIN).get_by_text("No training film for this model").wait_for(timeout=30_000)
        for code in ("PlotlyChart.", "Metric.", "DownloadButton."):
            assert any(s.startswith(code) for s in scripts), (code, scripts)
        assert not any(s.startswith("Table.") for s in scripts), scripts
        choose_view(pg, "Masks")  # the session's next run: a page with a table
        pg.locator(MAIN).locator("table").first.wait_for(timeout=60_000)
        assert not any(s.startswith(("Table.", "DataFrame.")) for s in scripts), scripts
        assert pg.locator(".st-key-atlas-warm").count() == 0
        assert pg.locator("[data-testid='stDataFrame']").count() == 0
        assert_no_exception(pg)
    finally:
        pg.context.close()
        stop_server(server)


@pytest.fixture
def broken_checkpoint(atlas_checkpoints):
    """A folder beside `demo` with a valid config and vocabularies but garbage weights."""
    folder = atlas_checkpoints / "broken"
    folder.mkdir()
    for name in ("config.json", "vocab.src.json", "vocab.tgt.json"):
        shutil.copy(atlas_checkpoints / "demo" / name, folder / name)
    (folder / "model.safetensors").write_bytes(b"\x00garbage, not safetensors\xff" * 100)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.browser
def test_broken_checkpoint_shows_an_error_naming_the_folder(page, app_server, broken_checkpoint):
    open_app(page, app_server.link(ckpt="broken"))
    errors = alert_texts(page, "Error")
    assert len(errors) == 1, errors
    assert "could not be loaded" in errors[0]
    # named as the server's checkpoint folder shows it, without the server's own path
    assert "checkpoints/broken/model.safetensors" in errors[0] and str(broken_checkpoint) not in errors[0]
    assert selectbox_value(page, "ckpt") == "broken"
    assert page.locator(CHART).count() == 0
    assert_no_exception(page)
