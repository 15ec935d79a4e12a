"""Real-browser regression tests of the defects a demanding user found: the Back button, links that
restore every choice, and text cut off on screen (measured by element widths and tick-label boxes).
"""
from __future__ import annotations

import urllib.parse

import pytest

from browser_support import (
    CHART,
    EXCEPTION,
    MAIN,
    choose_view,
    new_page,
    open_app,
    runs,
    selectbox_value,
    selected_view,
    wait_charts,
    wait_idle,
    wait_new_run,
    widget,
)
from page_checks import OVERLAPS_JS, TRUNCATED_JS

SENTENCE = "Ein Hund läuft im Schnee."

def assert_no_exception(pg) -> None:
    boxes = pg.locator(EXCEPTION)
    assert boxes.count() == 0, "the app showed an exception:\n" + "\n---\n".join(boxes.all_inner_texts())


def query(pg) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query).items()}


def history_step(pg, direction: str) -> None:
    """Press the browser's Back or Forward button and wait for the run it starts."""
    before = runs(pg)
    (pg.go_back if direction == "back" else pg.go_forward)(wait_until="commit")
    wait_new_run(pg, before)


@pytest.mark.browser
def test_back_and_forward_move_through_the_views_a_user_clicked(page, app_server):
    open_app(page, app_server.link(view="Overview", text=SENTENCE))
    wait_charts(page)
    visited = ["Embeddings", "Attention", "Masks", "Decoding"]
    for view in visited:
        choose_view(page, view)
        assert query(page)["view"] == view
    for expected in reversed(["Overview"] + visited[:-1]):
        history_step(page, "back")
        assert selected_view(page) == expected, f"Back should open {expected}"
        assert query(page)["view"] == expected  # the app did not write the later view back into the URL
    history_step(page, "forward")
    assert selected_view(page) == "Embeddings" and query(page)["view"] == "Embeddings"
    assert query(page)["text"] == SENTENCE  # the sentence is kept all along
    assert_no_exception(page)


@pytest.mark.browser
def test_back_restores_a_layer_change(page, app_server):
    open_app(page, app_server.link(view="Attention", kind="enc_self", layer=1, head=1, text=SENTENCE))
    wait_charts(page)
    before = runs(page)
    widget(page, "layer").locator("input[role='combobox']").click()
    page.locator("[role='listbox'] [role='option']").get_by_text("2", exact=True).click()
    wait_new_run(page, before)
    assert query(page)["layer"] == "2"
    history_step(page, "back")
    assert selectbox_value(page, "layer") == "1" and "layer" not in query(page)


LINKS = {
    "Masks": (dict(view="Masks", pad_layer=2, pad_head=3, causal_layer=2, causal_head=4, pad_on=0),
              {"pad_layer": "2", "pad_head": "3", "causal_layer": "2", "causal_head": "4"}),
    "Decoding": (dict(view="Decoding", dec_step=2, dec_layer=1, dec_head=2, prefix="A dog"),
                 {"dec_layer": "1", "dec_head": "head 2"}),
    "Attention": (dict(view="Attention", kind="dec_self", layer=2, head=4, rescale=1, off="enc_self-2-1,cross-1-2"),
                  {"kind": "Decoder masked self-attention (EN → EN)", "layer": "2", "head": "4"}),
}


@pytest.mark.browser
@pytest.mark.parametrize("name", list(LINKS))
def test_a_link_restores_every_choice_and_keeps_it_in_the_url(page, app_server, name):
    params, selects = LINKS[name]
    open_app(page, app_server.link(text=SENTENCE, **params))
    wait_charts(page)
    assert selected_view(page) == params["view"]
    for key, value in selects.items():
        assert selectbox_value(page, key) == value, key
    url = query(page)
    for key, value in params.items():
        assert url.get(key) == str(value), (key, url)  # the app did not drop or rewrite what the link said
    main = page.locator(MAIN)
    if name == "Masks":
        assert not widget(page, "pad_on").locator("input").is_checked()
        # the note or a chart's title: that chart may draw after the first
        main.get_by_text("mask OFF").or_(page.locator(f"{CHART} .gtitle", has_text="OFF")).first.wait_for(
            state="attached", timeout=60_000)
        assert main.get_by_text("mask OFF").count() + page.locator(f"{CHART} .gtitle", has_text="OFF").count() >= 1
    if name == "Decoding":
        assert "You forced the first 2 token(s): A dog" in main.inner_text()
        assert widget(page, "dec_step").locator("[data-testid='stSliderThumbValue']").inner_text().strip() == "2"
    if name == "Attention":
        assert widget(page, "rescale").locator("input").is_checked()
        chosen = widget(page, "off").inner_text()
        assert "cross L1 H2" in chosen and "encoder self L2 H1" in chosen
    assert_no_exception(page)


@pytest.mark.browser
def test_the_page_fetches_nothing_from_the_internet(chromium, app_server):
    """Offline classrooms: every request (favicon included) goes to our own server."""
    pg = new_page(chromium)
    requests: list[str] = []
    pg.on("request", lambda r: requests.append(r.url))
    try:
        open_app(pg, app_server.link(view="Attention", text=SENTENCE))
        wait_charts(pg)
        choose_view(pg, "Decoding")
        wait_charts(pg)
        outside = [u for u in requests if not u.startswith(app_server.url) and not u.startswith(("data:", "blob:"))]
        assert outside == [], outside
        assert any("favicon" in u or u.endswith(".png") for u in requests) or pg.evaluate(
            "() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
    finally:
        pg.context.close()


@pytest.mark.browser
def test_the_model_box_shows_a_long_model_name_whole(chromium, app_server):
    """The shipped model's name and its twin's label fit the sidebar's select box."""
    import shutil

    folder = app_server.checkpoint_dir / "multi30k-de-en"
    shutil.copytree(app_server.checkpoint_dir / "demo", folder)
    pg = new_page(chromium, width=1280, height=900)
    try:
        for ckpt in ("multi30k-de-en", "multi30k-de-en:untrained"):
            open_app(pg, app_server.link(view="Overview", text=SENTENCE, ckpt=ckpt))
            wait_charts(pg)
            assert pg.evaluate(TRUNCATED_JS) == [], ckpt
    finally:
        pg.context.close()
        shutil.rmtree(folder)


@pytest.mark.browser
@pytest.mark.parametrize("n_words", [12, 64])
def test_mask_matrix_tick_labels_do_not_overlap(chromium, app_server, n_words):
    words = ["Hund", "Schnee", "Mann", "läuft", "im", "Sofa", "Gras", "Spielzeug"]
    text = " ".join(words[i % len(words)] for i in range(n_words))
    pg = new_page(chromium, width=1440, height=1000)
    try:
        open_app(pg, app_server.link(view="Masks", text=text))
        wait_charts(pg)
        wait_idle(pg)
        overlaps = pg.evaluate(OVERLAPS_JS)
        assert overlaps == [], overlaps[:10]
        assert_no_exception(pg)
    finally:
        pg.context.close()


@pytest.mark.browser
def test_the_json_download_equals_the_cli_file(page, app_server, tmp_path):
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from model.io import export

    open_app(page, app_server.link(view="Attention", text=SENTENCE))
    wait_charts(page)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download this trace (JSON)").first.click()
    got = json.loads(Path(info.value.path()).read_text(encoding="utf-8"))
    assert info.value.suggested_filename.startswith("atlas_demo_Ein-Hund-läuft-im-Schnee_greedy")
    out = tmp_path / "cli.json"
    assert export.main([SENTENCE, "--checkpoint", str(app_server.checkpoint_dir / "demo"), "--out", str(out)]) == 0
    assert same(got, json.loads(out.read_text(encoding="utf-8")))


def same(a, b, tol: float = 2e-5) -> bool:
    """Equal structures; numbers within `tol` (the app runs one torch thread, the CLI several: the last
    float digits may differ)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k], tol) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= tol
    return a == b


@pytest.mark.browser
def test_attention_csv_has_the_pages_token_labels_and_rows_that_sum_to_one(page, app_server):
    import csv
    from pathlib import Path

    open_app(page, app_server.link(view="Attention", kind="cross", layer=2, head=3, text=SENTENCE))
    wait_charts(page)
    with page.expect_download() as info:
        page.get_by_role("button", name="This head (CSV)").first.click()
    assert info.value.suggested_filename.endswith("_attention_cross_L2_H3.csv")
    rows = list(csv.reader(Path(info.value.path()).open(encoding="utf-8")))
    header, body = rows[0], rows[1:]
    one_head = page.locator(CHART).nth(1)  # the large single-head chart
    x_ticks = one_head.locator(".xtick text").evaluate_all("els => els.map(e => e.textContent)")
    y_ticks = one_head.locator(".ytick text").evaluate_all("els => els.map(e => e.textContent)")
    assert header[0] == "query" and header[1:] == x_ticks  # keys: the German tokens, as on screen
    assert [r[0] for r in body] == y_ticks  # queries: the decoder input, as on screen
    for r in body:
        assert abs(sum(float(v) for v in r[1:]) - 1.0) < 1e-4


# Centre of one cell of the "every layer × head" heatmap on screen, found by its row and column labels; the
# centres of the first and last columns of the head named `title`, and the centre of that title (x).
OVERVIEW_CELL_JS = """([row, col, title]) => {
  const gd = document.querySelector(".st-key-overview_fig .js-plotly-plot");
  const t = gd._fullData[0], box = gd.querySelector('.nsewdrag').getBoundingClientRect();
  const r = t.y.indexOf(row), c = t.x.indexOf(col);
  if (r < 0 || c < 0) return null;
  const note = [...gd.querySelectorAll('.annotation')].find(a => a.textContent === title).getBoundingClientRect();
  const at = (i, n, lo, size) => lo + (i + 0.5) / n * size;
  return {x: at(c, t.x.length, box.left, box.width), y: at(r, t.y.length, box.top, box.height),
          // the first and last column of the same head
          head_left: at(t.x.findIndex(v => v.startsWith(title + ', ')), t.x.length, box.left, box.width),
          head_right: at(t.x.findLastIndex(v => v.startsWith(title + ', ')), t.x.length, box.left, box.width),
          title_x: note.left + note.width / 2};
}"""


@pytest.mark.browser
def test_every_layer_and_head_grid_shows_the_recorded_weight_under_the_right_labels(page, app_server):
    """The overview is one heatmap with gaps: hovering where layer 2, head 3 is drawn names that cell, its weight is
    the one the model recorded (the head's CSV), and the "head 3" title stands over that thumbnail."""
    import csv
    from pathlib import Path

    open_app(page, app_server.link(view="Attention", kind="cross", layer=2, head=3, text=SENTENCE))
    wait_charts(page)
    with page.expect_download() as info:
        page.get_by_role("button", name="This head (CSV)").first.click()
    body = list(csv.reader(Path(info.value.path()).open(encoding="utf-8")))[1:]
    q, k = 1, 2
    chart = page.locator(".st-key-overview_fig")
    chart.scroll_into_view_if_needed()
    cell = page.evaluate(OVERVIEW_CELL_JS, [f"layer 2, query {q}", f"head 3, key {k}", "head 3"])
    assert cell is not None, "the overview has no row or column with those labels"
    page.mouse.move(cell["x"], cell["y"])
    label = chart.locator(".hoverlayer")
    label.locator("text").first.wait_for(state="attached", timeout=5_000)
    text = label.text_content()
    assert f"layer 2, query {q}" in text and f"head 3, key {k}" in text, text
    assert f"weight {float(body[q][k + 1]):.3f}" in text, (text, body[q])
    # the title over the thumbnail's columns, not over a neighbour's
    assert cell["head_left"] < cell["title_x"] < cell["head_right"], cell


@pytest.mark.browser
def test_a_figure_saves_as_svg_with_a_name_that_says_what_it_is(page, app_server):
    import xml.etree.ElementTree as ET
    from pathlib import Path

    open_app(page, app_server.link(view="Attention", kind="enc_self", layer=1, head=2, text=SENTENCE, fig_format="svg"))
    wait_charts(page)
    chart = page.locator(CHART).nth(1)
    chart.hover()
    with page.expect_download() as info:
        chart.locator(".modebar-btn[data-title^='Download plot']").click()
    name = info.value.suggested_filename
    assert name.endswith(".svg") and "Ein-Hund" in name and "attention_enc_self_L1_H2" in name, name
    root = ET.parse(Path(info.value.path())).getroot()  # parses as XML
    assert root.tag.endswith("svg")
