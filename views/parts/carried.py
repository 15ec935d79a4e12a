"""What attention carries, on the Attention page: the weights, their value norms, or ALTI+ (docs/contributions.md).

The weights come from the decoding's trace; value norms and ALTI+ from one teacher-forced pass along the same
tokens (model/analysis/contributions.py), so the rows are the same decoder steps."""
from __future__ import annotations

import numpy as np
import streamlit as st

from model.service import source_share_marks
from views.plumbing.state import Context, contributions

MEASURES = {"weights": "weights α", "norms": "value norms ‖α·f‖", "alti": "ALTI+ (a layer's)"}
EXPLAIN = {
    "weights": "",
    "norms": "Value norms (Kobayashi et al. 2020): the length of the vector each key sends each query through the "
             "head, α times the length of its value taken through W_O. Much weight on a key whose value is short "
             "sends little: watch the end token's column fade. It says what arrives, not what the next layers make "
             "of it.",
    "alti": "ALTI+ (Ferrando et al. 2022): each key's share of what the layer's attention block outputs at each "
            "query, the residual (the query's own stream) included, so each row sums to 1. It is a layer's: the heads "
            "are taken together. It leaves the feed-forward out.",
}
NAMES = {"norms": "value norm ‖α·f‖", "alti": "ALTI+ share"}  # on the colour bar and in the hover
OWN = "(own stream)"  # cross-attention's ALTI+ column for the residual: the decoder's own stream


def choose(ctx: Context) -> str:
    """The measure to draw (URL `carry`), and its sentence (not in presenter mode)."""
    measure = st.radio("What to draw", list(MEASURES), key="carry", format_func=MEASURES.get, horizontal=True,
                       persist_state="session",
                       help="Where each head looks (the weights), or what it carries: value norms per head, "
                            "ALTI+ per layer. docs/contributions.md gives the formulas.")
    if EXPLAIN[measure] and not ctx.present:
        st.caption(EXPLAIN[measure])
    return measure


def record(ctx: Context):
    """Value norms and ALTI+ along the decoding shown (its end token included when it finished)."""
    r = ctx.result
    return contributions(ctx.key, ctx.text, tuple(r.raw_tokens) + ((ctx.facts["end_token"],) if r.finished else ()))


def carried(ctx: Context, measure: str, kind: str, k_tokens: list[str]) -> tuple[np.ndarray, str, float, list[str]]:
    """(values (L, h, i, j), their name, the colour scale's top, the key axis's tokens) of ``measure`` for
    ``kind``: value norms per head, or ALTI+ as one "head" per layer (cross-attention with its own-stream column)."""
    rec = record(ctx)
    if measure == "norms":
        values = rec.value_norm[kind].astype(np.float32)
        return values, NAMES["norms"], float(values.max()) or 1.0, k_tokens
    values = rec.alti[kind][:, None].astype(np.float32)  # (L, 1, i, j[+1])
    keys = k_tokens + [OWN] if kind == "cross" else k_tokens
    return values, NAMES["alti"], 1.0, keys


def low_share(ctx: Context, share: float) -> str:
    """A sentence flagging a source share low for this model (below the 5th percentile of its tokens on the annotated
    sentences), or what it is compared with; "" where the model has no calibration."""
    marks = None if ctx.key.twin or ctx.key.toy else source_share_marks(ctx.key.folder())
    if marks is None or "5" not in marks["percentiles"]:
        return ""
    low = float(marks["percentiles"]["5"])
    where = (f"the 5th percentile ({low:.0%}) of this model's {marks.get('tokens', 'output')} tokens on 100 Multi30k "
             "sentences (source_share.json, made by `python -m model.contributions --calibrate`)")
    if share < low:
        return f":material/warning: **Low for this model**: below {where}."
    return f"Not low for this model: {where} is lower."
