"""Every chart is drawn once where it appears, and looks as Streamlit's theme drew it.

Streamlit's chart element hands Plotly.react a figure twice when it mounts; the app's figures are prepared so that
the second time is no change (viz.transport.browser_json, viz.look). These tests count Plotly's full draws (each
starts with the `plotly_beforeplot` event) per chart in Chromium after a control's change (on every page as it
appears: tests/browser/test_browser_tour.py), and compare every style Plotly resolved for a figure drawn the app's
way with the same figure drawn with Streamlit's theme.
"""
from __future__ import annotations

import json
import re

import pytest

from browser_support import (
    new_page,
    open_app,
    select_option,
    selectbox_value,
    start_server,
    stop_server,
    wait_charts,
    widget,
)
from page_checks import DRAW_COUNTER_JS, settled_draws
from viz.look import CHART_TEXT, FADED_TEXT, look

pytestmark = pytest.mark.browser  # every test here drives Chromium

def test_a_chart_changed_by_a_control_is_drawn_once(chromium, app_server):
    """A control's change (another layer) draws the chart it changes once (every chart drawn once when a page
    appears, in every view and mode: tests/browser/test_browser_tour.py)."""
    page = new_page(chromium)
    try:
        page.add_init_script(DRAW_COUNTER_JS)
        open_app(page, app_server.link(view="Attention"))
        wait_charts(page)
        # Plotly draws a chart again once a font it asked for has loaded (a bold title's face, say): load every
        # face the page declares first, so that what is counted is the chart element's own doing.
        page.evaluate("() => Promise.all([...document.fonts].map(f => f.load().catch(() => null)))")
        settled_draws(page)
        layer = selectbox_value(page, "layer")
        widget(page, "layer").locator("input[role='combobox']").click()
        options = [t.strip() for t in page.locator("[role='listbox'] [role='option']").all_inner_texts()]
        page.keyboard.press("Escape")
        other = next(o for o in options if o != layer)
        select_option(page, "layer", other)
        wait_charts(page)
        draws = settled_draws(page)
        assert any(f"layer {other}" in title and len(sizes) == 1 for title, sizes in draws), draws  # redrawn once
        assert not [d for d in draws if len(d[1]) > 1], f"charts drawn more than once: {draws}"
    finally:
        page.context.close()


# ----------------------------------------------------------------------------- the look

# Everything Plotly resolved for a chart (its full layout and traces), without its private parts and data arrays.
RESOLVED_JS = """key => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  const seen = new WeakSet();
  const plain = (k, v) => {
    if (k.startsWith('_') || k === 'template' || typeof v === 'function') return undefined;
    if (ArrayBuffer.isView(v)) return 'array';
    if (Array.isArray(v) && v.length && (typeof v[0] === 'number' || v[0] === null || Array.isArray(v[0])
                                          || ArrayBuffer.isView(v[0]))) return 'array';
    if (v && typeof v === 'object') { if (seen.has(v)) return 'seen'; seen.add(v); }
    return v;
  };
  const ticks = [...gd.querySelectorAll('.xtick text, .ytick text')].map(t => t.textContent);
  const title = gd.querySelector('.gtitle');
  const bold = title && (title.querySelector('tspan[style*="bold"]') || title);
  return {layout: JSON.parse(JSON.stringify(gd._fullLayout, plain)),
          data: JSON.parse(JSON.stringify(gd._fullData, plain)),
          template: JSON.parse(JSON.stringify(gd.layout.template || null)), ticks,
          title: title ? [title.textContent, getComputedStyle(bold).fontWeight,
                          getComputedStyle(bold).fontFamily] : null};
}"""

# What may differ: how the title is set in bold (<b> in the text against the font's weight: the title tests below
# compare the drawn text and weight), the template itself (written into the figure instead), the figure's name for
# its content, and the trace ids Plotly makes up.
EXPECTED_DIFFERENCES = {"layout.template", "layout.datarevision", "layout.title.text", "layout.title.font.weight"}
# What viz/axis_notes.py changes on purpose: nothing has Plotly measure the tick labels, and the axis titles are notes
# placed past them (each note is put back as its axis's title before comparing: same text, same font).
NOTE_PATHS = re.compile(r"layout\.[xy]axis\d*\.(automargin|ticklabeloverflow|title\.standoff)"
                        r"|data\[\d+\]\.colorbar\.ticklabeloverflow")
# Plotly's own ids, and the tick spacing it computed while drawing (kept from an earlier draw in the chart drawn
# twice); the ticks drawn are compared as text below.
IGNORED_KEYS = {"uid", "dtick", "tick0"}


def same_fonts(value):
    """``value`` with every font-family list free of repeats: a stack that names a font twice is the same stack
    (Streamlit's theme can prepend its font to a family that already starts with it)."""
    if isinstance(value, dict):
        return {k: (", ".join(dict.fromkeys(f.strip() for f in v.split(","))) if k == "family" and isinstance(v, str)
                    else same_fonts(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [same_fonts(v) for v in value]
    return value


def differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            sub = f"{path}.{k}" if path else k
            if sub in EXPECTED_DIFFERENCES or k in IGNORED_KEYS or NOTE_PATHS.fullmatch(sub):
                continue
            if k not in a or k not in b:
                out.append(f"{sub}: {a.get(k, '(unset)')!r:.80} | {b.get(k, '(unset)')!r:.80}")
            else:
                out += differences(a[k], b[k], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r:.80} | {b!r:.80}"]


def notes_as_titles(resolved: dict) -> dict:
    """The resolved figure with each axis-title note (viz/axis_notes.py) put back as its axis's title."""
    layout, kept = resolved["layout"], []
    for note in layout.get("annotations") or []:
        m = re.fullmatch(r"([xy]axis\d*) title", note.get("name") or "")
        if m:
            layout[m[1]]["title"] = {**(layout[m[1]].get("title") or {}), "text": note["text"], "font": note["font"]}
        else:
            kept.append(note)
    layout["annotations"] = kept
    return resolved


def untitled_dropped(themed: dict, baked: dict) -> None:
    """The title of every axis that shows none under the theme (no text: Plotly resolves it to its placeholder,
    "Click to enter X axis title", drawn only in an editable chart) left out of both: the app's look sends no title
    there, so Plotly resolves another default font for a title that is never drawn."""
    for name, axis in themed["layout"].items():
        text = (axis.get("title") or {}).get("text") or "" if isinstance(axis, dict) else ""
        if re.fullmatch(r"[xy]axis\d*", name) and (not text or text.startswith("Click to enter")):
            axis.pop("title", None)
            baked["layout"].get(name, {}).pop("title", None)


@pytest.fixture(scope="module")
def look_page(chromium, tmp_path_factory, atlas_checkpoints):
    log = tmp_path_factory.mktemp("look_server") / "streamlit.log"
    server = start_server(atlas_checkpoints, "demo", log, script="tests/chart_look_app.py")
    page = new_page(chromium)
    try:
        open_app(page, server.url)
        page.wait_for_function("n => document.querySelectorAll(\"[data-testid='stPlotlyChart'] .main-svg\")"
                               ".length >= n", arg=8, timeout=60_000)
        page.wait_for_timeout(1000)
        yield page
    finally:
        page.context.close()
        stop_server(server)


@pytest.mark.parametrize("name", ["attention", "candidates", "stages", "scaling"])
def test_a_chart_looks_as_streamlits_theme_drew_it(look_page, name):
    themed = look_page.evaluate(RESOLVED_JS, f"theme_{name}")
    # the app's look writes Streamlit's grey chart text darker (contrast, viz.look.CHART_TEXT): compare with that done
    themed = json.loads(json.dumps(themed).replace(f'"{FADED_TEXT}"', f'"{CHART_TEXT}"'))
    baked = notes_as_titles(look_page.evaluate(RESOLVED_JS, f"baked_{name}"))
    untitled_dropped(themed, baked)
    assert themed["template"] is not None and baked["template"] is None  # the two ways, as meant
    found = differences(same_fonts({"layout": themed["layout"], "data": themed["data"]}),
                        same_fonts({"layout": baked["layout"], "data": baked["data"]}))
    assert not found, "resolved styles differ (Streamlit's theme | the app's look):\n" + "\n".join(found)
    assert themed["ticks"] == baked["ticks"] and themed["ticks"]
    if themed["title"] or baked["title"]:  # same text, same weight (bold), same font
        assert same_fonts({"family": themed["title"][2]}) == same_fonts({"family": baked["title"][2]})
        assert themed["title"][:2] == baked["title"][:2] and baked["title"][1] == "700"


def test_the_stored_look_is_what_streamlits_theme_makes_of_plotly_white(look_page):
    """viz/chart_look.json is Streamlit's light theme over plotly_white; when Streamlit changes its theme, this
    fails: copy the template below into the file (leaving out geo, map, polar, scene and ternary)."""
    template = same_fonts(look_page.evaluate(RESOLVED_JS, "theme_attention")["template"])
    stored = look()
    live = {"layout": {k: v for k, v in template["layout"].items() if k in stored["layout"]},
            "data": {k: v for k, v in template["data"].items() if k in stored["data"]}}
    assert live == stored, json.dumps(template, sort_keys=True)
    assert set(stored["layout"]) >= set(template["layout"]) - {"geo", "map", "polar", "scene", "ternary"}
