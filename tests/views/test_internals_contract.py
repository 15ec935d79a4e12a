"""The private Plotly names the speed layer uses (viz/plotly_internals.py) still mean what it assumes, and with the
layer switched off (ATLAS_PUBLIC_ONLY=1, public API only) every figure is the same. A failure here after a Plotly
upgrade names the function to port; the app then still draws with the switch set."""
from __future__ import annotations

import json

import numpy as np
import plotly
import plotly.graph_objects as go
import pytest

from viz import plotly_internals as pi
from viz.attention import heads_figure
from viz.transport import browser_json, figure_json

UPGRADE = f"Plotly {plotly.__version__} changed a private name: port viz/plotly_internals.py"


def _fig() -> go.Figure:
    return go.Figure(data=[go.Heatmap(z=[[1, 2], [3, 4]], colorbar={"title": {"text": "p"}})],
                     layout={"title": {"text": "t"}, "height": 300})


def test_private_names_mean_what_the_speed_layer_assumes():
    fig = _fig()
    assert isinstance(fig._data, list) and fig._data[0]["z"] is not None, f"{UPGRADE}: fig._data (traces)"
    assert fig._data[0]["type"] == "heatmap", f"{UPGRADE}: fig._data holds plain trace dicts"
    assert fig._layout["title"]["text"] == "t", f"{UPGRADE}: fig._layout (layout)"
    assert "colorbar" in fig.data[0]._props and "height" in fig.layout._props, f"{UPGRADE}: obj._props (props)"
    loose = go.Figure(data=[{"type": "heatmap", "z": [[1]]}], layout={"height": 1}, _validate=False)
    assert loose._validate is False and loose.layout.height == 1, f"{UPGRADE}: go.Figure(_validate=) (new_figure)"
    from _plotly_utils.basevalidators import ColorscaleValidator  # noqa: F401 (named_colorscale)
    from _plotly_utils.utils import to_typed_array_spec  # noqa: F401 (typed_array)

    spec = pi.typed_array(np.arange(3, dtype=np.float32))
    assert spec["dtype"] == "f4" and "bdata" in spec, f"{UPGRADE}: to_typed_array_spec (typed_array)"


def test_the_public_fallbacks_give_the_same_values():
    fig = _fig()
    with pi.speed_layer(False):
        public = (pi.traces(fig), pi.layout(fig), pi.props(fig.layout), pi.named_colorscale("Viridis"))
    with pi.speed_layer(True):
        private = (pi.traces(fig), pi.layout(fig), pi.props(fig.layout), pi.named_colorscale("Viridis"))
    assert public[0][0]["type"] == private[0][0]["type"] and public[1]["title"] == private[1]["title"]
    assert public[2]["height"] == private[2]["height"] == 300
    assert [c for _, c in public[3]] == [c for _, c in private[3]] and len(public[3]) > 2
    np.testing.assert_allclose([p for p, _ in public[3]], [p for p, _ in private[3]], atol=1e-12)


@pytest.mark.parametrize("on", [True, False])
def test_a_page_figure_is_the_same_with_the_speed_layer_off(on):
    """The Attention page's figure built and sent both ways: the browser gets the same chart."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(5), size=(4, 5)).astype(np.float32)  # (h, i, j)
    tokens = ["Ein", "Hund", "läuft", ".", "</s>"]

    def sent(flag: bool) -> tuple[dict, dict]:
        with pi.speed_layer(flag):
            fig = heads_figure(probs, tokens, tokens, "enc_self", layer=0)
            return json.loads(browser_json(fig, "r1")), json.loads(figure_json(fig))

    fast, slow = sent(True), sent(on)
    for a, b in zip(fast, slow):
        assert [t["type"] for t in a["data"]] == [t["type"] for t in b["data"]]
        assert a["layout"].get("title") == b["layout"].get("title")
    z_fast, z_slow = fast[0]["data"][0]["z"], slow[0]["data"][0]["z"]
    np.testing.assert_allclose(np.array(z_fast, dtype=float), np.array(z_slow, dtype=float), rtol=1e-6)


# ----------------------------------------------------------------------------- Streamlit
# (views/plumbing/streamlit_internals.py)

def test_streamlit_still_has_the_history_flag_and_every_test_id_the_css_names():
    import dataclasses
    from pathlib import Path

    import streamlit
    from streamlit.runtime.scriptrunner import ScriptRunContext

    from views.plumbing import streamlit_internals as si

    port = f"Streamlit {streamlit.__version__} changed a private name: port views/plumbing/streamlit_internals.py"
    assert "is_history_navigation" in {f.name for f in dataclasses.fields(ScriptRunContext)}, f"{port}: the flag"
    bundle = " ".join(p.read_text(encoding="utf-8", errors="ignore")
                      for p in (Path(streamlit.__file__).parent / "static" / "static" / "js").glob("*.js"))
    named = set().union(*(si.test_ids(css) for css in (si.PAGE_CSS, si.PHONE_CSS, si.PRESENTER_CSS, si.HEADER_CSS,
                                                                   si.NOTE_CSS)))
    assert {"stSidebar", "stCaptionContainer", "stMarkdownContainer"} <= named  # the test reads what it should
    missing = sorted(t for t in named if t not in bundle)
    assert not missing, f"{port}: the frontend has no element with data-testid {missing}"


def test_streamlit_runs_a_sessions_script_in_the_thread_the_app_counts():
    from streamlit.testing.v1 import AppTest

    from views.plumbing import streamlit_internals as si

    def script():
        import threading

        import streamlit as st

        st.write(threading.current_thread().name)

    at = AppTest.from_function(script).run()
    assert at.markdown[0].value == si.SCRIPT_THREAD, "Streamlit renamed its script thread: port runs_in_flight"
    assert si.runs_in_flight() == 0  # none is running now


def test_with_the_switch_the_css_names_no_test_id_and_keeps_the_apps_own_rules():
    from views.plumbing import streamlit_internals as si

    with pi.speed_layer(False):
        plain = si.style(si.PAGE_CSS)
        assert si.history_navigation() is None
    assert "data-testid" not in plain and ".atlas-scroll" in plain and plain.startswith("<style>")
    with pi.speed_layer(True):
        assert "data-testid='stSidebar'" in si.style(si.PAGE_CSS)
