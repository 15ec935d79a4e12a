"""What views/plumbing/figcache.py relies on in the installed Streamlit and Plotly, and what it leaves to Plotly.

figcache replaces ``plotly.io.to_json`` for the whole process (views/streamlit_internals.serve_kept_json). It
answers one call only: the one that ``st.plotly_chart`` makes with a kept figure,
``plotly.io.to_json(fig.to_dict(), validate=False)`` (Streamlit
1.67's ``streamlit/elements/plotly_chart.py``: ``plotly.tools.return_figure_from_figure_or_data`` calls
``to_dict()`` on a Figure, then ``plotly_chart_proto.spec = plotly.io.to_json(figure, validate=False)``). If a
Streamlit release calls it another way, the first test fails here, not on a page that shows stale or empty charts.
Everything else goes to Plotly's own function, unchanged.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io
import plotly.io._json
from streamlit.testing.v1 import AppTest

from views.plumbing.figcache import FigureCache, drawable
from viz.attention import attention_figure

ROOT = Path(__file__).resolve().parents[2]
TOKS = ["<bos>", "▁A", "▁dog", "&", "<b>"]

# Run by AppTest in this process: the kept figure goes through st.plotly_chart as the app hands it over, with a
# spy around plotly.io.to_json (figcache's replacement) that records every call and its arguments.
CHART_SCRIPT = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})

import numpy as np
import plotly.io
import streamlit as st

from views.plumbing.figcache import FigureCache
from viz.attention import attention_figure

p = np.random.default_rng(0).dirichlet(np.ones(5), size=5).astype(np.float32)
kept = FigureCache().get(attention_figure, p, {TOKS!r}, {TOKS!r}, "enc_self")
calls = []
replacement = plotly.io.to_json


def spy(fig, *args, **kwargs):
    calls.append((fig, args, kwargs))
    return replacement(fig, *args, **kwargs)


plotly.io.to_json = spy
try:
    st.plotly_chart(kept, theme=None)
finally:
    plotly.io.to_json = replacement
st.session_state["calls"] = calls
st.session_state["kept"] = kept
"""


def _probs(n: int = 5) -> np.ndarray:
    return np.random.default_rng(1).dirichlet(np.ones(n), size=n).astype(np.float32)


def test_st_plotly_chart_serialises_a_kept_figure_with_the_one_call_figcache_answers():
    at = AppTest.from_string(CHART_SCRIPT, default_timeout=60).run()
    assert not at.exception, [e.message for e in at.exception]
    kept = at.session_state["kept"]
    calls = at.session_state["calls"]
    # One call: the dict that the kept figure's to_dict() returns (the same object), and validate=False only.
    assert len(calls) == 1, calls
    fig, args, kwargs = calls[0]
    assert fig is kept.to_dict()
    assert args == () and kwargs == {"validate": False}
    # The kept JSON is what reaches the chart's proto, as it is.
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    spec = charts[0].proto.spec
    assert spec == kept.to_dict().json
    sent = json.loads(spec)
    assert sent["layout"]["datarevision"] and sent["data"][0]["type"] == "heatmap"
    assert sent["layout"]["height"] == kept.to_dict()["layout"]["height"]


def test_the_fallback_is_plotlys_own_to_json():
    assert plotly.io.to_json.__wrapped__ is plotly.io._json.to_json  # Plotly's function, not another wrapper


def test_figures_and_arguments_figcache_does_not_own_get_exactly_what_plotly_writes():
    own = plotly.io._json.to_json  # the function figcache replaced on plotly.io
    fig = attention_figure(_probs(), TOKS, TOKS, "enc_self")  # built, never kept
    small = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]), layout={"title": {"text": "x</script>"}})
    as_dict = small.to_dict()
    for figure in (fig, small, as_dict):
        assert plotly.io.to_json(figure) == own(figure)
        assert plotly.io.to_json(figure, validate=False) == own(figure, validate=False)
        assert plotly.io.to_json(figure, pretty=True) == own(figure, pretty=True)
    assert fig.to_json() == own(fig)  # Figure.to_json goes through plotly.io.to_json too
    # A kept figure's dict with other arguments than Streamlit's: Plotly's own answer (of that small dict).
    kept = FigureCache().get(attention_figure, _probs(), TOKS, TOKS, "enc_self").to_dict()
    for args, kwargs in (((False,), {}), ((), {"validate": False, "pretty": True}),
                         ((), {"validate": False, "remove_uids": True}), ((), {})):
        assert plotly.io.to_json(kept, *args, **kwargs) == own(kept, *args, **kwargs)
    assert plotly.io.to_json(kept, validate=False) == kept.json != own(kept, validate=False)
    # A figure drawable() prepared is owned only through its dict; the figure object itself is Plotly's.
    light = drawable(fig)
    assert plotly.io.to_json(light, validate=False) == own(light, validate=False)


def test_importing_figcache_again_keeps_plotlys_function_as_the_fallback():
    code = ("import importlib, plotly.io, plotly.io._json as own, views.plumbing.figcache as f; importlib.reload(f); "
            "assert plotly.io.to_json.__wrapped__ is own.to_json; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
