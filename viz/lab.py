"""The what-if lab's figures: a minimal pair's attention difference, effect grids of heads and of positions,
per-token bars, the logit lens, and why one token and not another.

Everything here takes NumPy arrays, token lists and strings read from model/records.py's records; nothing is
recomputed. Layers and heads are 0-based in the arrays and shown 1-based, as everywhere in the app. Shape letters
(see :mod:`viz`): ``L`` layers, ``h`` heads, ``s`` source and ``t`` decoder positions, ``k`` candidates, ``n``
aligned rows or columns of a minimal pair.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from viz import plotly_internals
from viz.heads import (
    CHOSEN_LINE,
    GROUP_NAMES,
    KIND_ORDER,
    PHONE_GAP_PX,
    SHORT_KINDS,
    chosen_outline,
    grid_layout,
    stacked_gap,
    texts_fit_cells,
)
from viz.heatmap import cell_axes, grid_figure, heatmap
from viz.kinds import kind_sides, resolve_languages
from viz.layout import label_margins, style_layout, styled_figure, text_px, title_wrap_chars, top_margin
from viz.scales import (
    PROB_SCALE,
    SIGNED_SCALE,
    WORSE,
    effect_colours,
    effect_legend,
    effect_scale,
    effect_words,
    resolve_scale,
)
from viz.text import cut_token, escape_token, escape_tokens, fmt_prob, title_lines
from viz.theme import figure_width, fit_height, theme
from viz.token_axes import axis_ticks, cell_names, label_px, plot_width_px, token_axis, value_ticks

SIGNED_D3 = "+.3f"  # signed values in hovers: the sign is the point


def symmetric_limit(*arrays, floor: float = 1e-6) -> float:
    """The largest |finite value| of the arrays, at least ``floor``: a diverging scale's ±limit (0 in the middle)."""
    finite = [np.abs(a[np.isfinite(a)]) for a in (np.asarray(x, dtype=np.float64) for x in arrays)]
    top = max((float(f.max()) for f in finite if f.size), default=0.0)
    return max(top, floor)


def sign_colours() -> tuple[str, str]:
    """(negative, positive) colours: the two ends of the theme's diverging scale."""
    scale = resolve_scale(SIGNED_SCALE)
    return scale[0][1], scale[-1][1]


def cell_text(value: float, fmt: str) -> str:
    """A cell's number: "n/a" for NaN, and a value that rounds to zero without a sign ("0.00", never "-0.00")."""
    if not np.isfinite(value):
        return "n/a"
    text = format(value, fmt)
    return text if any(c in "123456789" for c in text) else format(0.0, fmt.lstrip("+"))


def gap_line(gap: float | None) -> str:
    """The hover line of a share of a gap (patching): the cell's part of it in nats (its customdata), and the gap."""
    return "" if gap is None else f"<br>= %{{customdata:{SIGNED_D3}}} of the gap of {gap:+.3f} nats"


def _margins_held(build):
    """The margins set from the labels (viz.layout.label_margins) hold the lab figures' labels; plotly's own
    push of a few pixels more (its automargin) would only make the browser draw each figure twice."""
    @functools.wraps(build)
    def held(*args, **kwargs) -> go.Figure:
        fig = build(*args, **kwargs)
        for name, axis in plotly_internals.layout(fig).items():  # the raw layout, as viz.transport reads it
            if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
                axis["automargin"] = False
        return fig
    return held


def _replaced(labels: Sequence[str]) -> list[int]:
    """Positions of a minimal pair's labels that name a replaced token ("brauner→schwarzer", pairs.pair_labels)."""
    return [i for i, label in enumerate(labels) if "→" in label]


@_margins_held
def pair_difference_figure(diff: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], kind: str, *,
                           mask: np.ndarray | None = None, where: Sequence[Sequence[str]] | None = None,
                           title: str | None = None, width_px: int | None = None) -> go.Figure:
    """B − A of one head's attention over the aligned tokens of a minimal pair, ``diff`` (n_rows, n_cols), on a
    diverging scale centred on 0 (white: unchanged). ``row_labels``/``col_labels``: one per aligned pair
    ("Hund", or "brauner→schwarzer" where the token was replaced: those labels are never thinned away);
    ``where[r][c]``: a hover line naming the cell's positions in A and in B. ``mask`` (n_rows, n_cols): False
    where either side was masked."""
    q, k = kind_sides(kind)
    if theme().short_axis_titles:
        q, k = q.split(",")[0], k.split(",")[0]
    lim = symmetric_limit(diff, floor=0.01)
    fig = heatmap(diff, list(row_labels), list(col_labels), row_title=f"query ({q}; A and B aligned) ↓",
                  col_title=f"key ({k}; A and B aligned) →", mask=mask, zmin=-lim, zmax=lim,
                  colorscale=SIGNED_SCALE, title=title, value_name="weight B − A", fmt=SIGNED_D3,
                  row_name="query", col_name="key", colorbar_title="weight B − A", width_px=width_px,
                  keep_rows=_replaced(row_labels), keep_cols=_replaced(col_labels))
    if where is not None:  # the only per-cell hover text: the axes name the aligned pair, this its positions
        trace = fig.data[0]
        trace.customdata = np.asarray(where, dtype=str)  # (n_rows, n_cols)
        trace.hovertemplate = trace.hovertemplate.replace("<extra>", "<br>%{customdata}<extra>")
    return fig


@_margins_held
def head_effect_grid(values: Mapping[str, np.ndarray], value_label: str, *, fmt: str = "+.2f",
                     zmin: float | None = None, zmax: float | None = None, chosen: tuple[str, int, int] | None = None,
                     title: str | None = None, cell_values: bool = True, gap: float | None = None,
                     worse: str = WORSE) -> go.Figure:
    """One layer × head panel per attention kind, ``values[kind]`` (L, h), the value written in each cell (unless
    ``cell_values`` is False: a narrow figure in large type has no room for them; hover still gives them).

    The values are changes of a log-probability of the translation, or with ``gap`` shares of a gap of that many
    nats (as patching's are): one effect colour axis for all panels (viz.scales.effect_scale), ``zmin``..``zmax``
    (default ± the largest |value|), 0 white, warm where the log-probability fell (value × gap < 0), which the
    colour bar calls ``worse``. NaN cells are left empty ("n/a"). ``chosen`` = (kind, layer, head), 0-based: that
    cell is outlined. Hover: the head in words and its value; with ``gap`` also the cell's part of the gap in nats
    (value × gap), beside the gap itself.
    """
    kinds = [k for k in KIND_ORDER if k in values]
    arrays = {k: np.asarray(values[k], dtype=np.float64) for k in kinds}
    if zmin is None or zmax is None:
        lim = symmetric_limit(*arrays.values())
        zmin, zmax = -lim, lim
    rows, cols = grid_layout(len(kinds), max(a.shape[1] for a in arrays.values()))
    data, axes, shapes = [], {}, []
    tick = theme().tick
    for p, kind in enumerate(kinds):
        z = arrays[kind]
        n_layers, n_h = z.shape
        x_ref, y_ref = cell_axes(p)
        xs, ys = list(range(1, n_h + 1)), list(range(1, n_layers + 1))
        first = p == 0 or cols == 1
        axes[p] = (dict(tickvals=xs, ticktext=[str(h) for h in xs], title=dict(text="head"), showgrid=False,
                        zeroline=False, tickfont=dict(size=tick), range=[0.5, n_h + 0.5]),
                   dict(tickvals=ys, ticktext=[str(l) for l in ys], title=dict(text="layer" if first else ""),
                        showgrid=False, zeroline=False, tickfont=dict(size=tick), range=[n_layers + 0.5, 0.5]))
        cells = dict(type="heatmap", z=np.where(np.isfinite(z), z, np.nan), x=xs, y=ys, coloraxis="coloraxis",
                     xaxis=x_ref, yaxis=y_ref, hoverongaps=False, xgap=2, ygap=2, name=GROUP_NAMES[kind],
                     hovertemplate=f"{GROUP_NAMES[kind]} layer %{{y}}, head %{{x}}<br>{value_label}: "
                                   f"%{{z:{SIGNED_D3}}}{gap_line(gap)}<extra></extra>")
        if gap is not None:
            cells["customdata"] = z * gap  # (L, h) nats
        texts = [[cell_text(v, fmt) for v in row] for row in z]
        if cell_values and texts_fit_cells([t for row in texts for t in row], n_h, cols, max(11, tick - 2)):
            cells.update(text=texts, texttemplate="%{text}",
                         textfont=dict(size=max(11, tick - 2)))
        data.append(cells)
        if chosen is not None and chosen[0] == kind and chosen[1] < n_layers and chosen[2] < n_h:
            l, h = chosen[1] + 1, chosen[2] + 1
            shapes += chosen_outline(x_ref, y_ref, h, l)
    n_layers = max(a.shape[0] for a in arrays.values())
    panel = 60 + 48 * n_layers + (PHONE_GAP_PX if theme().figure_px else 0)
    coloraxis = dict(colorscale=effect_scale(higher_is_worse=gap is not None and gap < 0), cmin=zmin, cmax=zmax,
                     colorbar=dict(title=dict(text=effect_legend(value_label, worse), side="right"),
                                   tickfont=dict(size=tick)))
    return grid_figure(data, axes, rows, cols, 0.07, stacked_gap(rows),
                       # presenter mode's large type: the short names, or neighbouring titles run into each other
                       cell_titles=[(SHORT_KINDS if theme().min_font else GROUP_NAMES)[k] for k in kinds],
                       title_font=max(15, theme().base),
                       style=dict(title=title, subplot_titles=True, height=rows * panel + 140),
                       coloraxis=coloraxis, **({"shapes": shapes} if shapes else {}))


@_margins_held
def token_bars_figure(values: np.ndarray, tokens: Sequence[str], value_label: str, *, highlight: int | None = None,
                      axis_title: str = "output token", title: str | None = None,
                      width_px: int | None = None) -> go.Figure:
    """Signed bars, one per token (``values`` (n,)): changes of each token's log-probability, below 0 (worse for
    the translation) in the effect scale's warm colour, above in its cool one, as the x axis's title says; bar
    ``highlight`` is outlined and keeps its label when crowded labels are thinned. Hover: the token with its
    position, and the value."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(v) != len(tokens):
        raise ValueError(f"{len(v)} values but {len(tokens)} tokens")
    neg, pos = effect_colours(higher_is_worse=False)
    colours = [neg if x < 0 else pos for x in v]
    lines = [CHOSEN_LINE if i == highlight else c for i, c in enumerate(colours)]
    xs = np.arange(len(v), dtype=np.int32)
    names = cell_names(tokens)
    plot_px = plot_width_px(width_px, colorbar=False)
    x_ticks = axis_ticks(tokens, len(v), angle=-45, axis_px=plot_px, keep=[] if highlight is None else [highlight])
    bar = dict(type="bar", x=xs, y=v, name=value_label,
               marker=dict(color=colours, line=dict(color=lines, width=[3 if i == highlight else 1
                                                                         for i in range(len(v))])),
               customdata=np.asarray(names, dtype=str),
               hovertemplate=f"{axis_title}: %{{customdata}}<br>{value_label}: %{{y:{SIGNED_D3}}}<extra></extra>")
    lim = symmetric_limit(v, floor=0.01) * 1.1
    # The words of the colours go beside the x axis's title: along the short y axis they would not fit, and a
    # phone's narrow plot still holds the short form.
    layout = dict(xaxis=dict(**x_ticks, title=dict(text=f"{axis_title} → ({effect_words(short=True)})")),
                  yaxis=dict(range=[-lim, lim], zeroline=True, zerolinecolor="#444", zerolinewidth=1,
                             title=dict(text=value_label), tickfont=dict(size=theme().tick)),
                  showlegend=False)
    return styled_figure([bar], layout, title, height=fit_height(360 + label_px(tokens) // 2))


@_margins_held
def position_effect_figure(enc: np.ndarray, dec: np.ndarray, src_labels: Sequence[str], dec_labels: Sequence[str],
                           value_label: str, *, zmin: float = -1.0, zmax: float = 1.0, title: str | None = None,
                           width_px: int | None = None, keep_src: Sequence[int] = (), keep_dec: Sequence[int] = (),
                           gap: float | None = None) -> go.Figure:
    """Two position × layer panels side by side: the encoder's residual stream ``enc`` (L, s) at each source
    position (left) and the decoder's ``dec`` (L, t) at each decoder position (right). Positions run down the y
    axis as tokens do in the attention maps (their labels read upright), layers along x; one effect colour axis
    ``zmin``..``zmax``, warm where the translation fares worse, as in :func:`head_effect_grid` (values beyond it
    saturate; hover gives them exactly). NaN cells are left empty. ``keep_src``/``keep_dec``: positions whose labels
    are never thinned away (the changed source token, the decoder position of the token measured); ``gap``: as in
    :func:`head_effect_grid`."""
    src, tgt = (escape_token(x) for x in resolve_languages(None, None))
    tick = theme().tick
    panels = [("encoder", np.asarray(enc, dtype=np.float64), list(src_labels), f"source position ({src})"),
              ("decoder", np.asarray(dec, dtype=np.float64), list(dec_labels), f"decoder input position ({tgt})")]
    n_rows = max(z.shape[1] for _, z, _, _ in panels)
    height = fit_height(top_margin(title_lines(title)) + 20 + 110 + max(220, 26 * n_rows))
    rows_px = height - top_margin(title_lines(title)) - 20 - 110  # the plots' height (the rest: title, layer axis)
    data, axes = [], {}
    for p, (side, z, labels, _), keep in zip(range(2), panels, (keep_src, keep_dec)):
        n_layers, n = z.shape
        if len(labels) != n:
            raise ValueError(f"{side}: {n} positions but {len(labels)} labels")
        x_ref, y_ref = cell_axes(p)
        xs = list(range(1, n_layers + 1))
        axes[p] = (dict(tickvals=xs, ticktext=[str(l) for l in xs], title=dict(text="after layer"), showgrid=False,
                        zeroline=False, tickfont=dict(size=tick), range=[0.5, n_layers + 0.5]),
                   dict(**axis_ticks(labels, n, reverse=True, axis_px=rows_px, keep=keep), **token_axis(labels),
                        showgrid=False, zeroline=False))  # the panel's title names the positions
        data.append(dict(type="heatmap", z=np.where(np.isfinite(z), z, np.nan).T, x=xs, y=cell_names(labels),
                         coloraxis="coloraxis", xaxis=x_ref, yaxis=y_ref, hoverongaps=False, xgap=1, ygap=1,
                         name=f"{side} residual stream",
                         hovertemplate=f"{side} residual stream after layer %{{x}}, at %{{y}}<br>{value_label}: "
                                       f"%{{z:{SIGNED_D3}}}{gap_line(gap)}<extra></extra>",
                         **({} if gap is None else {"customdata": z.T * gap})))  # (n, L) nats
    coloraxis = dict(colorscale=effect_scale(higher_is_worse=gap is not None and gap < 0), cmin=zmin, cmax=zmax,
                     colorbar=dict(title=dict(text=effect_legend(value_label), side="right"), tickfont=dict(size=tick)))
    # The right panel's row labels stand between the two: the gap is as wide as they are (no axis title there: the
    # panels' titles name the positions).
    longest = max((text_px(t, tick) for t in escape_tokens([cut_token(x, theme().max_label_chars)
                                                            for x in dec_labels])), default=20)
    gap = min(0.4, (longest + 30) / max(1, figure_width(width_px)))
    return grid_figure(data, axes, 1, 2, gap, 0.0, cell_titles=[f"{side}: {where} ↓" for side, _, _, where in panels],
                       title_font=max(15, theme().base),
                       style=dict(title=title, height=height, subplot_titles=True), coloraxis=coloraxis)


@_margins_held
def lens_figure(top_tokens: Sequence[Sequence[str]], top_probs: np.ndarray, chosen_probs: np.ndarray,
                chosen_ranks: Sequence[int], chosen_token: str, *, title: str | None = None) -> go.Figure:
    """The logit lens at one step: left, each decoder layer's top-k candidates (L, k) as cells coloured by their
    probability on the shared 0..1 scale, the token written in the cell; right, p(chosen token) per layer as bars
    with its rank among the whole vocabulary. Layer 1 at the top, the last layer (the model's own output) last."""
    p = np.asarray(top_probs, dtype=np.float64)
    n_layers, k = p.shape
    chosen = np.asarray(chosen_probs, dtype=np.float64).reshape(-1)
    ranks = [int(r) for r in chosen_ranks]
    ys = list(range(1, n_layers + 1))
    tick = theme().tick
    words = [escape_tokens(row) for row in top_tokens]  # (L, k)
    custom = np.asarray([[w, fmt_prob(v)] for wr, pr in zip(words, p) for w, v in zip(wr, pr)],
                        dtype=str).reshape(n_layers, k, 2)
    cells = dict(type="heatmap", z=p, x=list(range(1, k + 1)), y=ys, coloraxis="coloraxis", text=words,
                 texttemplate="%{text}", textfont=dict(size=max(11, tick - 1)), customdata=custom, xgap=2, ygap=2,
                 xaxis="x", yaxis="y", name="candidates",
                 hovertemplate="layer %{y}, rank %{x}<br>token: %{customdata[0]}<br>probability %{customdata[1]}"
                               "<extra></extra>")
    chosen_name = escape_token(chosen_token)
    bars = dict(type="bar", x=chosen, y=ys, orientation="h", xaxis="x2", yaxis="y2", name=f"p({chosen_name})",
                marker=dict(color=theme().highlight_colour), text=[f"{fmt_prob(v)} · rank {r}" for v, r in
                                                                    zip(chosen, ranks)],
                textposition="outside", cliponaxis=False, textfont=dict(size=tick),
                customdata=np.asarray([[fmt_prob(v), str(r)] for v, r in zip(chosen, ranks)], dtype=str),
                hovertemplate=f"layer %{{y}}<br>p({chosen_name}) %{{customdata[0]}}, rank %{{customdata[1]}} of the "
                              "vocabulary<extra></extra>")
    y_set = dict(tickvals=ys, ticktext=[str(l) for l in ys], title=dict(text="decoder layer"), showgrid=False,
                 zeroline=False, tickfont=dict(size=tick), range=[n_layers + 0.5, 0.5])
    axes = {0: (dict(tickvals=list(range(1, k + 1)), title=dict(text="rank (1 = most probable)"), showgrid=False,
                     zeroline=False, tickfont=dict(size=tick)), y_set),
            1: (dict(range=[0, 1.45], tickvals=[0, 0.5, 1], title=dict(text=f"p({chosen_name})"), showgrid=False,
                     zeroline=False, tickfont=dict(size=tick)), dict(y_set, title=dict(text=""), showticklabels=False))}
    coloraxis = dict(colorscale=resolve_scale(PROB_SCALE), cmin=0.0, cmax=1.0,
                     colorbar=dict(title=dict(text="probability", side="right"), tickfont=dict(size=tick), x=1.02))
    height = fit_height(200 + 56 * n_layers)
    return grid_figure([cells, bars], axes, 1, 2, 0.06, 0.0,
                       cell_titles=["top candidates per layer", f"the chosen token: {chosen_name}"],
                       title_font=max(15, theme().base), coloraxis=coloraxis, showlegend=False,
                       style=dict(title=title, height=height, subplot_titles=True))


@_margins_held
def contrast_figure(input_x_grad: np.ndarray, relevance: np.ndarray, src_tokens: Sequence[str], target: str,
                    foil: str, *, title: str | None = None, width_px: int | None = None) -> go.Figure:
    """Why ``target`` and not ``foil``, over the source tokens: above, input × gradient of log p(A) − log p(B)
    (s,), signed bars (positive: the word pushes towards A); below, the relevance of the same difference (s,),
    non-negative, summing to 1. Hover: the source token with its position, and the value.

    The two panels share the figure's height, which presenter mode caps: the y ticks are chosen for the height
    each panel gets (:func:`viz.token_axes.value_ticks`, never closer than a line of labels), the gap between the
    panels holds the lower panel's title, and the token labels of the largest bars are never thinned away. In
    presenter mode the axis titles give their room to the plots: the panels' titles name the units, and the
    figure's title should name the source words."""
    ixg = np.asarray(input_x_grad, dtype=np.float64).reshape(-1)
    rel = np.asarray(relevance, dtype=np.float64).reshape(-1)
    if not len(ixg) == len(rel) == len(src_tokens):
        raise ValueError(f"{len(ixg)} and {len(rel)} values but {len(src_tokens)} source tokens")
    a, b = escape_token(target), escape_token(foil)
    src, _ = resolve_languages(None, None)
    neg, pos = sign_colours()
    t = theme()
    xs = np.arange(len(ixg), dtype=np.int32)
    names = np.asarray(cell_names(src_tokens), dtype=str)
    peaks = [int(np.argmax(np.abs(ixg))), int(np.argmax(rel))] if len(ixg) else []
    x_ticks = axis_ticks(src_tokens, len(ixg), angle=-45, axis_px=plot_width_px(width_px, colorbar=False), keep=peaks)
    diff = f"log p({a}) − log p({b})"
    data = [dict(type="bar", x=xs, y=ixg, xaxis="x", yaxis="y", customdata=names, name="input × gradient",
                 marker=dict(color=[neg if v < 0 else pos for v in ixg]),
                 hovertemplate=f"source token: %{{customdata}}<br>input × gradient of {diff}: "
                               f"%{{y:{SIGNED_D3}}} nats<extra></extra>"),
            dict(type="bar", x=xs, y=rel, xaxis="x2", yaxis="y2", customdata=names, name="relevance",
                 marker=dict(color=t.bar_colour, line=dict(color=t.bar_colour, width=1)),
                 hovertemplate=f"source token: %{{customdata}}<br>relevance for {diff}: %{{y:.3f}}<extra></extra>")]
    presenter = bool(t.min_font)  # the panels' titles name the units, the figure's title the source words
    x_title = "" if presenter else f"source token ({escape_token(src)}) →"
    x_set = dict(**x_ticks, title=dict(text=x_title), zeroline=False)
    height = fit_height(520 + label_px(src_tokens) // 2)
    wrap = title_wrap_chars(title, width_px)
    title_font = max(15, t.base)
    # Pixels: the plots get the height less the top margin (title, upper panel's title) and the token labels
    # below (as viz.layout.styled_figure will set them); the gap between the panels holds the lower one's title.
    top = style_layout(title, height, None, wrap, True)["margin"]["t"]
    plots = max(1.0, height - top - max(20.0, label_margins({"xaxis": x_set}, t.base)[1]))
    gap = 1.3 * title_font + t.tick / 2 + 6  # clear of the upper panel's lowest tick label too
    panel = (plots - gap) / 2
    lim = symmetric_limit(ixg, floor=0.01) * 1.1
    rel_top = max(1e-6, float(rel.max(initial=0.0))) * 1.15
    axes = {0: (dict(x_set, showticklabels=False, title=dict(text="")),
                dict(range=[-lim, lim], tickvals=value_ticks(-lim, lim, panel), zeroline=True, zerolinecolor="#444",
                     title=dict(text="" if presenter else "nats"), tickfont=dict(size=t.tick))),
            1: (x_set, dict(range=[0, rel_top], tickvals=value_ticks(0.0, rel_top, panel), tickfont=dict(size=t.tick),
                            title=dict(text="" if presenter else "share"), zeroline=False))}
    return grid_figure(data, axes, 2, 1, 0.0, min(0.5, gap / plots), showlegend=False,
                       cell_titles=[f"input × gradient of {diff} (positive: towards {a})",
                                    f"relevance (Chefer et al.) of {diff}, sums to 1"] if not presenter
                       else ["input × gradient (nats)", "relevance (share)"],  # presenter: the title says the rest
                       title_font=title_font,
                       style=dict(title=title, height=height, subplot_titles=True, wrap_chars=wrap))
