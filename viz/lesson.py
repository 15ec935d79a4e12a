"""The lesson file: the app's figures for one or several sentences in one HTML page that opens offline.

``lesson_html(lesson)`` takes plain data (model/io/lesson.py gathers it from traced translations):

    lesson = {"model": {"name", "src_lang", "tgt_lang", "parameters", "d_model", "n_heads", "n_encoder_layers",
                        "n_decoder_layers", "max_len", "pe_layout", "test_bleu", "trained" (optional, True),
                        optional: "positions", "pos_offset", "scale_embedding", "norm" (model/nn/config.py)},
              "sentences": [{"source_tokens", "unknown", "dropped", "translation", "decoding", "finished",
                             "src_tokens", "tgt_tokens",
                             "probs": {kind: (L, h, i, j)}, "masks": {kind: (L, i, j) bool, True = may attend},
                             "src_embed": {stage: (s, d)}, "tgt_embed": {stage: (t, d)} (no "positional" where
                             the model adds no position vectors: T5),
                             "steps": [{"prefix", "top_tokens", "top_probs", "chosen" (index into top_tokens),
                                        "chosen_token", "chosen_prob", "forced", "cross": (L, h, s)}]}]}

Every figure is built by the same function, with the same arguments, as on the app's page (so titles, axes, hover
and colours match), then stored in a :class:`viz.figure_pack.FigurePack`: one figure whole per part, the others
as their differences. The page (viz/lesson_page.py) holds Plotly's own code and redraws one chart per part when a
selector changes. Shape letters: see :mod:`viz`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from viz.attention import attention_figure, heads_figure, overview_figure
from viz.decoding import candidates_figure, decoding_table, step_cross_attention_figure
from viz.embeddings import embedding_stages, scaling_figure, stages_figure
from viz.figure_pack import FigurePack, figure_dict
from viz.kinds import KIND_EXPLAIN, KIND_NAMES, LANGUAGE_NAMES, kind_labels, using_languages
from viz.layout import PAGE_WIDTH_PX, styled_figure
from viz.lesson_page import page_html
from viz.positional import pe_heatmap, position_similarity_figure, sinusoidal_encoding, waves_figure
from viz.text import fmt_prob
from viz.theme import DEFAULT_THEME, using_theme

KINDS = ("enc_self", "dec_self", "cross")
PE_POSITIONS = 50  # the Positional encoding page's defaults (views/plumbing/urlstate.py)
PE_DIMS = (0, 1, 4, 5, 16, 17, 64, 65)
SIDES = ("src", "tgt")


def languages(model: dict) -> dict:
    """Short codes for axes ("DE") and names for sentences ("German"), as the app calls the two sides."""
    src, tgt = model["src_lang"], model["tgt_lang"]
    return {"src": src.upper(), "tgt": tgt.upper(), "src_name": LANGUAGE_NAMES.get(src.lower(), src),
            "tgt_name": LANGUAGE_NAMES.get(tgt.lower(), tgt)}


def readable(tokens: list[str]) -> str:
    """The sentence as text for the sentence selector: SentencePiece pieces joined at their "▁" marks."""
    if any(t.startswith("▁") for t in tokens):
        return "".join(tokens).replace("▁", " ").strip()
    return " ".join(tokens)


def formula_gap(pe: np.ndarray, recorded: np.ndarray) -> float:
    """Largest |difference| between the formula's encoding ``pe`` (n, d) and the one the model added (s, d),
    over the positions both have."""
    m = min(len(pe), len(recorded))
    return float(np.abs(np.asarray(pe[:m], np.float64) - np.asarray(recorded[:m], np.float64)).max()) if m else 0.0


def check_lesson(lesson: dict) -> None:
    """Raise ValueError saying what is missing when ``lesson`` is not what :func:`lesson_html` draws."""
    for key in ("model", "sentences"):
        if key not in lesson:
            raise ValueError(f"the lesson has no {key!r}; build it with model.io.lesson.lesson_data")
    if not lesson["sentences"]:
        raise ValueError("the lesson has no sentences: give at least one")
    for n, s in enumerate(lesson["sentences"], 1):
        missing = [k for k in ("probs", "masks", "steps", "src_embed", "tgt_embed", "src_tokens", "tgt_tokens")
                   if k not in s]
        if missing:
            raise ValueError(f"sentence {n} has no {missing}")


def attention_figures(pack: FigurePack, n: int, s: dict) -> None:
    """Sentence ``n``'s Attention page: one head, all heads of a layer, every layer × head, for every kind."""
    for kind in KINDS:
        probs, masks = s["probs"][kind], s["masks"][kind]  # (L, h, i, j), (L, i, j)
        q_tokens, k_tokens = (s["src_tokens"], s["src_tokens"]) if kind == "enc_self" else (
            s["tgt_tokens"], s["src_tokens"] if kind == "cross" else s["tgt_tokens"])
        for layer in range(probs.shape[0]):
            for head in range(probs.shape[1]):
                fig = attention_figure(probs[layer, head], q_tokens, k_tokens, kind, mask=masks[layer],
                                       title=f"{KIND_NAMES[kind].split(' (')[0]}, layer {layer + 1}, "
                                             f"head {head + 1}", width_px=PAGE_WIDTH_PX)
                _add(pack, f"s{n}/head/{kind}/{layer}/{head}", fig, f"s{n}/head/{kind}/0/0", "s0/head/enc_self/0/0")
            fig = heads_figure(probs[layer], q_tokens, k_tokens, kind, layer, mask=masks[layer],
                               width_px=PAGE_WIDTH_PX)
            _add(pack, f"s{n}/heads/{kind}/{layer}", fig, f"s{n}/heads/{kind}/0", "s0/heads/enc_self/0")
        _add(pack, f"s{n}/grid/{kind}", overview_figure(probs, kind), "s0/grid/enc_self", "s0/grid/enc_self")


def decoding_figures(pack: FigurePack, n: int, s: dict) -> None:
    """Sentence ``n``'s Decoding page: each step's candidates and, per decoder layer and head (0: the mean of the
    heads), where that step's query looked in the source."""
    for k, step in enumerate(s["steps"], 1):
        fig = candidates_figure(step["top_tokens"], step["top_probs"], step["chosen"],
                                title=f"step {k}: next-token candidates")
        _add(pack, f"s{n}/cand/{k}", fig, f"s{n}/cand/1", "s0/cand/1")
        cross = step["cross"]  # (L, h, s)
        for layer in range(1, cross.shape[0] + 1):
            for head in range(cross.shape[1] + 1):
                weights = cross[layer - 1].mean(0) if head == 0 else cross[layer - 1, head - 1]
                what = "mean of heads" if head == 0 else f"head {head}"
                fig = step_cross_attention_figure(weights, s["src_tokens"],
                                                  title=f"step {k}: cross-attention, layer {layer}, {what}",
                                                  width_px=PAGE_WIDTH_PX // 2)
                _add(pack, f"s{n}/cross/{k}/{layer}/{head}", fig, f"s{n}/cross/1/1/0", "s0/cross/1/1/0")


def positions_of(model: dict, s: dict) -> str:
    """How the model encodes positions: the lesson's "positions" where it says, else "sinusoidal" where the trace
    holds position vectors and "relative" where it holds none (T5)."""
    return model.get("positions") or ("sinusoidal" if "positional" in s["src_embed"] else "relative")


def scales_embeddings(model: dict, emb: dict) -> bool:
    """Whether the model multiplies its token embeddings by √d_model: the lesson's "scale_embedding" where it says,
    else whether the recorded rows changed at that step (× 1 leaves them as they were)."""
    if "scale_embedding" in model:
        return bool(model["scale_embedding"])
    return not np.array_equal(emb["token"], emb["scaled"])


def note_figure(title: str) -> dict:
    """A figure with no data, only a title saying why a part has nothing to draw for this model."""
    hidden = dict(visible=False)
    return styled_figure([], dict(xaxis=hidden, yaxis=hidden), title, height=160)


def embedding_figures(pack: FigurePack, n: int, s: dict, model: dict) -> None:
    """Sentence ``n``'s Embeddings page, both sides: the stages the model has and the √d_model scaling."""
    for side in SIDES:
        emb, tokens = s[f"{side}_embed"], s[f"{side}_tokens"]
        scaled = scales_embeddings(model, emb)
        titles, arrays = embedding_stages(emb, scaled, positions_of(model, s), model.get("norm", "layer"))
        _add(pack, f"s{n}/stages/{side}", stages_figure(titles, arrays, tokens), f"s{n}/stages/src", "s0/stages/src")
        fig = (scaling_figure(emb["token"], emb["scaled"], model["d_model"], tokens) if scaled
               else note_figure("This model does not scale its token embeddings by √d_model"))
        _add(pack, f"s{n}/scaling/{side}", fig, f"s{n}/scaling/src", "s0/scaling/src")


def positional_figures(pack: FigurePack, model: dict, positions: str = "sinusoidal") -> np.ndarray:
    """The Positional encoding page at its defaults; returns the (PE_POSITIONS, d) encoding drawn: the formula's
    rows from the model's "pos_offset" on. A model without a fixed table (learned or relative ``positions``) gets
    figures that say so (the app's page draws what it recorded per sentence)."""
    n, d = min(PE_POSITIONS, model["max_len"]), model["d_model"]
    layout = model.get("pe_layout", "interleaved") if positions == "sinusoidal" else "interleaved"
    pe = sinusoidal_encoding(n, d, layout, int(model.get("pos_offset", 0)))  # (n, d) the formula, as the model has it
    for name, fig, group in _positional_dicts(n, d, layout, int(model.get("pos_offset", 0)), positions):
        _add(pack, name, fig, group, "")
    return pe


NO_TABLE = {"learned": "This model learned its position vectors: no formula to draw (the app's Positional encoding "
                       "page shows the vectors of each sentence)",
            "relative": "This model adds no position vectors: a learned bias by distance is added to its attention "
                        "scores (the app's Positional encoding page shows it)"}


@lru_cache(maxsize=4)
def _positional_dicts(n: int, d: int, layout: str, offset: int = 0,
                      positions: str = "sinusoidal") -> tuple[tuple[str, dict, str], ...]:
    """(name, figure dict, group) of the Positional encoding figures: the same for every sentence of a model, so
    the app's download builds them once per model shape (the pack only reads the dicts, never changes them).
    Built in the default theme, as every lesson figure is (the theme is the only other input)."""
    if positions in NO_TABLE:
        note = note_figure(NO_TABLE[positions])
        figs = [("pe/waves", note, "pe/waves"), ("pe/matrix", note, "pe/matrix")]
        figs += [(f"pe/similarity/{ref}", note, "pe/similarity/0") for ref in range(n)]
        return tuple((name, figure_dict(fig), group) for name, fig, group in figs)
    pe = sinusoidal_encoding(n, d, layout, offset)
    figs = [("pe/waves", waves_figure(pe, [i for i in PE_DIMS if i < d] or [0], layout), "pe/waves"),
            ("pe/matrix", pe_heatmap(pe), "pe/matrix")]
    figs += [(f"pe/similarity/{ref}", position_similarity_figure(pe, ref_position=ref), "pe/similarity/0")
             for ref in range(n)]
    return tuple((name, figure_dict(fig), group) for name, fig, group in figs)


def _add(pack: FigurePack, name: str, fig, group: str, root: str) -> None:
    """Store a figure as changes to its group's first figure, and a group's first as changes to the part's."""
    like = group if name != group else root if name != root and root else None
    pack.add(name, fig, like if like in pack.names else None)


def sentence_meta(s: dict, pe: np.ndarray, langs: dict) -> dict:
    """What the page writes as text for one sentence: the header, the steps, the table of all steps."""
    unknown = [t for t, u in zip(s["source_tokens"], s["unknown"]) if u]
    steps = [{"read": " ".join(st["prefix"]), "chosen": st["chosen_token"], "prob": fmt_prob(st["chosen_prob"]),
              "forced": st["forced"]} for st in s["steps"]]
    table = decoding_table([{"step": k, "prefix": st["prefix"], "chosen": st["chosen_token"],
                             "prob": st["chosen_prob"]} for k, st in enumerate(s["steps"], 1)])
    return {"source": " ".join(s["source_tokens"]), "label": readable(s["source_tokens"]),
            "translation": s["translation"], "decoding": s["decoding"],
            # counted as the app counts them: what the encoder reads, its end token included (views/parts/counts.py)
            "finished": s["finished"], "n_source": len(s["src_tokens"]), "end": s["src_tokens"][-1], "unknown": unknown,
            "dropped": len(s.get("dropped", [])), "steps": steps,
            "table": table.to_html(index=False, border=0, classes="steps", escape=True),
            "layers": {kind: int(s["probs"][kind].shape[0]) for kind in KINDS},
            "heads": int(s["probs"]["enc_self"].shape[1]),
            # a model without position vectors (T5) added nothing: zero vectors, which the formula does not match
            "pe_gap": formula_gap(pe, s["src_embed"].get("positional", np.zeros((len(s["src_tokens"]), pe.shape[1])))),
            "n_src_positions": len(s["src_tokens"])}


def lesson_pack(lesson: dict) -> tuple[FigurePack, list[dict]]:
    """Every figure of the lesson in one pack, and each sentence's text; built with the app's default theme and
    the model's language labels."""
    check_lesson(lesson)
    model, langs = lesson["model"], languages(lesson["model"])
    pack, metas = FigurePack(), []
    with using_theme(DEFAULT_THEME), using_languages(langs["src"], langs["tgt"]):
        pe = positional_figures(pack, model, positions_of(model, lesson["sentences"][0]))
        for n, s in enumerate(lesson["sentences"]):
            attention_figures(pack, n, s)
            decoding_figures(pack, n, s)
            embedding_figures(pack, n, s, model)
            metas.append(sentence_meta(s, pe, langs))
    return pack, metas


def lesson_html(lesson: dict, made_by: str = "") -> str:
    """The lesson as one self-contained HTML page (Plotly's code inlined; no request leaves the page).

    ``made_by`` says how the file was made (a command line, or the app's download), in the page's footer.
    """
    pack, metas = lesson_pack(lesson)
    langs = languages(lesson["model"])
    texts = {"kinds": kind_labels(langs), "explain": {k: v.format(src=langs["src_name"], tgt=langs["tgt_name"])
                                                      for k, v in KIND_EXPLAIN.items()}}
    return page_html(pack.to_dict(), metas, lesson["model"], langs, texts, made_by)
