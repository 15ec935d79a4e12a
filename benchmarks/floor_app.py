"""The floor that bench_pages.py measures the app against: what Streamlit and Plotly alone cost.

The app's sidebar (a sentence box, the list of views) and, on every view, three ordinary Plotly figures of the app's
sizes (four 12 × 12 heatmaps side by side, one large heatmap, a bar chart of candidates), built with Plotly's normal
API on every run from nothing: no model, no cache. `streamlit run benchmarks/floor_app.py` (bench_pages.py starts it).
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from model.records import VIEWS  # noqa: E402  (torch-free: the app's own list of views)

N = 12  # tokens per axis, as a sentence of the shipped model
st.set_page_config(page_title="Floor", layout="wide")
ss = st.session_state
if "text" not in ss:  # the link's choices, as the app reads them
    ss["text"] = st.query_params.get("text", "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.")
    ss["view"] = st.query_params.get("view", "Overview") if st.query_params.get("view") in VIEWS else "Overview"
with st.sidebar:
    st.title("Floor")
    st.text_area("German sentence", key="text", height=90)
    st.radio("View", VIEWS, key="view")
st.query_params.from_dict({"text": ss["text"], "view": ss["view"]})

words = (ss["text"].split() + ["</s>"] * N)[:N]
tokens = [f"{w} ({i})" for i, w in enumerate(words)]
st.markdown(f"#### DE {' '.join(ss['text'].split())}")
st.markdown(f"### EN {ss['view']}")
rng = np.random.default_rng(int(hashlib.sha256((ss["text"] + ss["view"]).encode()).hexdigest()[:8], 16))


def weights(rows: int, cols: int) -> np.ndarray:
    z = rng.random((rows, cols)) ** 4
    return z / z.sum(axis=1, keepdims=True)


grid = make_subplots(rows=1, cols=4, subplot_titles=[f"head {h + 1}" for h in range(4)], horizontal_spacing=0.04)
for h in range(4):
    grid.add_trace(go.Heatmap(z=weights(N, N), x=tokens, y=tokens, zmin=0, zmax=1, colorscale="Blues",
                              showscale=h == 3), row=1, col=h + 1)
grid.update_yaxes(autorange="reversed")
grid.update_layout(title="Layer 1, every head", height=380)
st.plotly_chart(grid, width="stretch")

large = go.Figure(go.Heatmap(z=weights(N, N), x=tokens, y=tokens, zmin=0, zmax=1, colorscale="Blues"))
large.update_yaxes(autorange="reversed")
large.update_layout(title="Layer 1, head 1", height=560, width=700)
st.plotly_chart(large)

p = np.sort(weights(1, 10)[0])[::-1]
bars = go.Figure(go.Bar(x=p, y=[f"candidate {k + 1}" for k in range(10)], orientation="h"))
bars.update_yaxes(autorange="reversed")
bars.update_layout(title="Step 1: the candidates", height=360)
st.plotly_chart(bars, width="stretch")
