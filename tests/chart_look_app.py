"""A page for tests/browser/test_browser_single_draw.py: the same figures drawn twice, side by side in the page's order.

`st.plotly_chart(fig)` as the app drew its figures before (Streamlit's theme over the figure's plotly_white template,
typed arrays), then `views.parts.widgets.chart` as the app draws them now (the look written into the figure,
theme=None).
Run from the repository root: `streamlit run tests/chart_look_app.py`.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import streamlit as st

from views.parts.widgets import chart
from views.plumbing.streamlit_internals import PAGE_CSS, style
from viz.attention import attention_figure
from viz.decoding import candidates_figure
from viz.embeddings import embedding_stages_figure, scaling_figure

st.markdown(style(PAGE_CSS), unsafe_allow_html=True)  # the app's CSS: Streamlit's theme sizes charts by the page's font

rng = np.random.default_rng(0)
toks = ["<bos>", "▁A", "▁dog", "▁runs", "."]
probs = rng.random((5, 5)).astype(np.float32)
probs = np.tril(probs)
probs /= probs.sum(1, keepdims=True)
emb = [rng.normal(size=(5, 16)).astype(np.float32) for _ in range(4)]
FIGURES = {
    "attention": lambda: attention_figure(probs, toks, toks, "dec_self", mask=np.tril(np.ones((5, 5), bool)),
                                          title="with the mask (layer 1, head 1)"),
    "candidates": lambda: candidates_figure(["▁dog", "▁cat", "▁man"], np.array([0.6, 0.3, 0.1], np.float32), 0,
                                            title="step 3: next-token candidates"),
    "stages": lambda: embedding_stages_figure(*emb, toks),
    "scaling": lambda: scaling_figure(emb[0], emb[0] * 4.0, 16, toks),
}
for name, build in FIGURES.items():
    streamlit_theme, baked = st.columns(2)
    streamlit_theme.plotly_chart(build(), key=f"theme_{name}")
    chart(baked, build(), key=f"baked_{name}")
