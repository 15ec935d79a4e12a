"""The lesson file in Debian's Chromium with every network request blocked: it draws, and its selectors work.

The page is opened from file:// as from a USB stick; a route aborts every request but the file itself, and the
test fails if the page asked for anything (a script, a style sheet, a font) or logged an error. The last test
downloads the file from the app's sidebar and opens it the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser_support import open_app, wait_charts
from model import export as cli
from tests.tiny_checkpoint import GERMAN, make_tiny_checkpoint
from viz.figure_pack import FigurePack
from viz.lesson_page import page_data

pytestmark = pytest.mark.browser
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


@pytest.fixture(scope="module")
def lesson_file(tmp_path_factory) -> Path:
    folder = make_tiny_checkpoint(tmp_path_factory.mktemp("lesson_browser") / "demo")
    out = folder.parent / "lesson.html"
    assert cli.main([GERMAN[0], GERMAN[3], "--checkpoint", str(folder), "--html", str(out)]) == 0
    return out


class Offline:
    """A fresh page that may load one file and nothing else; it records what it tried and every error."""

    def __init__(self, chromium, path: Path):
        self.url = path.resolve().as_uri()
        self.context = chromium.new_context(viewport={"width": 1280, "height": 900})
        self.context.set_default_timeout(60_000)
        self.blocked: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, route) -> None:
        if route.request.url == self.url:
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def open(self):
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready=true]")
        self.page.wait_for_function("() => [...document.querySelectorAll('.chart')].every("
                                    "d => d.querySelector('.main-svg'))")
        return self.page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def offline(chromium, lesson_file):
    o = Offline(chromium, lesson_file)
    yield o
    o.close()


def title(page, chart: str) -> str:
    return page.locator(f"#{chart} .gtitle").first.text_content()


def z_of(page, chart: str) -> str:
    """The values the chart's first trace draws (as the page handed them to Plotly)."""
    return page.evaluate(f"() => JSON.stringify(document.getElementById('{chart}').data[0].z)")


def test_the_lesson_draws_with_every_request_blocked(offline):
    page = offline.open()
    charts = page.locator(".chart").count()
    assert charts == 10 and page.locator(".chart.js-plotly-plot > .plot-container .main-svg").count() >= charts
    assert page.locator("#chart-head .hm image, #chart-head image").count() >= 1  # the heatmap is painted
    assert page.locator("#sentence option").count() == 2
    assert offline.blocked == [] and offline.errors == []
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "lesson.png"))


def test_kind_layer_and_head_switch_the_chart(offline):
    page = offline.open()
    assert title(page, "chart-head") == "cross-attention, layer 1, head 1"  # the app's default kind
    before = z_of(page, "chart-head")
    page.select_option("#kind", value="dec_self")
    page.select_option("#layer", label="2")
    page.select_option("#head", label="3")
    assert title(page, "chart-head") == "decoder self-attention, layer 2, head 3"
    assert z_of(page, "chart-head") != before
    names = page.evaluate("() => document.getElementById('chart-head').data.map(t => t.name)")
    assert "masked" in names  # the causal mask, grey
    assert page.locator("#layer option").count() == 2 and page.locator("#head option").count() == 4
    assert "layer 2, all heads" in page.locator("#chart-heads .gtitle").first.text_content()
    page.evaluate("() => { const r = document.getElementById('step'); r.value = 2; "
                  "r.dispatchEvent(new Event('input')); }")
    assert title(page, "chart-cand") == "step 2: next-token candidates"
    page.select_option("#dec-head", label="head 1")
    assert title(page, "chart-cross").startswith("step 2: cross-attention, layer 2, head 1")
    first = page.locator("#translation").text_content()
    page.select_option("#sentence", index=1)
    assert page.locator("#translation").text_content() != first
    assert page.locator("#source").text_content().startswith("Ein Hund")
    assert offline.blocked == [] and offline.errors == []


def test_the_page_rebuilds_the_figures_python_stored(offline, lesson_file):
    page = offline.open()
    pack = FigurePack.from_dict(page_data(lesson_file.read_text(encoding="utf-8"))["pack"])
    for name in ("s0/head/enc_self/0/0", "s1/head/cross/1/3", "s1/heads/dec_self/1", "s0/cross/2/2/0",
                 "s1/cand/1", "s1/stages/tgt", "pe/similarity/7"):
        assert json.loads(page.evaluate(f"() => JSON.stringify(figure({json.dumps(name)}))")) == pack.figure(name)


def test_the_apps_download_is_the_lesson_of_the_sentence_on_screen(page, app_server, chromium, tmp_path):
    text = "Ein Hund läuft im Schnee."
    open_app(page, app_server.link(view="Attention", text=text))
    wait_charts(page)
    with page.expect_download(timeout=120_000) as info:
        page.get_by_role("button", name="Download a lesson file (HTML)").first.click()
    assert info.value.suggested_filename == "atlas_demo_Ein-Hund-läuft-im-Schnee_greedy-decoding.html"
    path = tmp_path / "downloaded.html"
    info.value.save_as(path)
    header = page.locator("[data-testid='stMain'] h3").first.text_content()
    data = page_data(path.read_text(encoding="utf-8"))
    assert len(data["sentences"]) == 1 and data["sentences"][0]["translation"] in header
    o = Offline(chromium, path)
    try:
        o.open()
        assert o.blocked == [] and o.errors == []
    finally:
        o.close()
