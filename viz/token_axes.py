"""Token axes of heatmaps: which tick labels fit and at what size, and the plot heights and widths that follow.

Shape letters (see :mod:`viz`): ``i`` query (row) positions, ``j`` key (column) positions. Axes are INTEGER
positions with token tick labels (thinned when crowded; hover names every token); a heatmap's token axis is a
category axis whose categories are the cells' names ``"tok (pos)"`` (:func:`cell_names`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from viz.layout import FIGURE_WIDTH_PX, text_px, top_margin
from viz.text import cut_token, escape_token, escape_tokens, visible_len
from viz.theme import DEFAULT_THEME, figure_width, theme

# A heatmap is ROW_PX pixels per query row plus room for
# the title and the key labels, between MIN_HEIGHT and MAX_HEIGHT; a facet panel
# is FACET_ROW_PX per row between MIN_PANEL_PX and MAX_PANEL_PX. Every token is
# labelled while the labels stand MIN_TICK_PX apart (their font shrinking to
# MIN_TICK_FONT on the way); beyond that, and beyond MAX_TICKS on an axis whose
# length is not known, only every n-th token is (hover still names every token).
ROW_PX = 28
MIN_HEIGHT, MAX_HEIGHT = 380, 1000
FACET_ROW_PX = 22
MIN_PANEL_PX, MAX_PANEL_PX = 220, 520
MIN_TICK_PX = DEFAULT_THEME.min_tick_px  # between neighbouring labels, across the text (the default theme's)
MAX_TICKS = 40
MIN_TICK_FONT = DEFAULT_THEME.min_tick  # no label is ever drawn smaller (the default theme's)


def cell_names(tokens: Sequence[str]) -> list[str]:
    """The name of each token's cell on a heatmap's category axis and in its hover: ``"tok (pos)"``, escaped.
    The position keeps repeated tokens apart (two "the" are two rows, never one)."""
    return [f"{t} ({i})" for i, t in enumerate(escape_tokens(tokens))]


def tick_step(n: int, axis_px: float | None = None, angle: int | None = None, count_rule: bool = True) -> int:
    """Label every ``tick_step``-th of ``n`` tokens: ≥ MIN_TICK_PX apart on an axis ``axis_px`` long, else
    ≤ MAX_TICKS labels.

    The distance counted is the one between neighbouring labels, across the
    text: for labels rotated by ``angle`` degrees that is the tick spacing
    times |sin(angle)|. ``count_rule=False``: never the count rule (how close two labels may stand).
    """
    step = max(1, math.ceil(n / MAX_TICKS)) if count_rule and not axis_px else 1
    if axis_px and n:
        step = max(step, math.ceil(theme().min_tick_px / (axis_px / n * _slant(angle))))
    return step


def tick_font(n: int, axis_px: float | None, step: int, angle: int | None = None) -> int:
    """Tick label size: the theme's with room to spare, smaller when crowded, ≥ its minimum."""
    t = theme()
    if not axis_px or not n:
        return t.tick
    gap = axis_px / n * step * _slant(angle)  # px between neighbouring labels
    return int(min(t.tick, max(t.min_tick, gap - 3)))


def _slant(angle: int | None) -> float:
    """Share of the tick spacing that separates rotated labels (1 for horizontal ones)."""
    return abs(math.sin(math.radians(angle))) if angle else 1.0


def plot_width_px(width_px: int | None, row_tokens=None, colorbar: bool = True,
                  cols: int = 1) -> float:
    """Width of one plot (of ``cols`` side by side) in a figure ``width_px`` wide (estimate).

    Takes off the margins, the row labels and title, and the colourbar.
    """
    cap = theme().max_label_chars
    longest = max((visible_len(escape_token(cut_token(t, cap))) for t in row_tokens), default=2) \
        if row_tokens is not None else 3
    bar = 110 if colorbar and not theme().figure_px else 0  # a phone's colour bar is below the plot (viz.phone)
    used = 40 + 0.57 * theme().tick * min(longest, 16) + 15 + theme().base + bar
    width = figure_width(width_px, FIGURE_WIDTH_PX)
    return max(40.0, (width - used) / cols * (0.95 if cols > 1 else 1))


def axis_ticks(tokens, n: int, angle: int | None = None, reverse: bool = False,
               axis_px: float | None = None, keep: Sequence[int] = ()) -> dict:
    """Integer axis settings: token tick labels at 0..n-1, range exactly the cells.

    ``axis_px`` (the axis length in pixels, if known) thins the labels with
    :func:`tick_step` and sizes them with :func:`tick_font`; rotated labels
    (``angle``) turn upright (-90°) when that lets more of them show. ``keep``: positions whose label
    matters (a changed token, a highlighted bar, the most-attended key) and is never thinned away
    (:func:`kept_ticks`). ``reverse`` puts position 0 at the top (query axes); the explicit range keeps
    the mask's "x" markers from padding the axis.
    """
    out: dict = dict(tickfont=dict(size=theme().tick))
    if reverse:
        out.update(autorange="reversed")
    if tokens is None:
        return out
    step = tick_step(n, axis_px, angle)
    if angle and step > 1 and tick_step(n, axis_px, -90) < step:  # upright labels fit more
        angle, step = -90, tick_step(n, axis_px, -90)
    # The closest two labels may stand: as many positions as the pixels ask for (the count rule alone may ask
    # for a wider step, which the regular labels keep).
    apart = min(step, tick_step(n, axis_px, angle, count_rule=False)) if axis_px else step
    ticks = kept_ticks(n, step, keep, apart)
    cap = theme().max_label_chars  # presenter mode: long tokens cut, hover names them whole
    text = escape_tokens([cut_token(t, cap) for t in tokens])
    closest = min((b - a for a, b in zip(ticks, ticks[1:])), default=step)
    out.update(tickmode="array", tickvals=ticks, ticktext=[text[i] for i in ticks],
               tickfont=dict(size=tick_font(n, axis_px, closest, angle)),
               range=[n - 0.5, -0.5] if reverse else [-0.5, n - 0.5])
    if angle is not None:
        out["tickangle"] = angle
    return out


def kept_ticks(n: int, step: int, keep: Sequence[int] = (), apart: int | None = None) -> list[int]:
    """Positions of ``n`` that get a label: every ``step``-th, and every position of ``keep`` that lies in
    0..n-1, whatever the step.

    A kept label pushes out the regular labels closer to it than ``apart`` positions (default ``step``: the
    spacing at which neighbouring labels do not overlap), so nothing is drawn over it. Kept positions are
    honoured in the order given: one closer than ``apart`` to an earlier kept one would overlap it and is left
    out (the hover still names every position).
    """
    apart = step if apart is None else max(1, apart)
    chosen: list[int] = []
    for k in keep:
        k = int(k)
        if 0 <= k < n and all(abs(k - c) >= apart for c in chosen):
            chosen.append(k)
    regular = [i for i in range(0, n, step) if all(abs(i - c) >= apart for c in chosen)]
    return sorted(chosen + regular)


def value_ticks(lo: float, hi: float, axis_px: float, min_px: float | None = None, most: int = 6) -> list[float]:
    """Round tick values on a value axis from ``lo`` to ``hi`` drawn ``axis_px`` long: at most ``most``, no two
    closer than ``min_px`` (default: the theme's spacing, and at least a line of its tick labels, for labels
    stacked on a y axis), so that labels never overlap however short the plot.

    The densest 1-2-5 step that does that and leaves two labels or more; where none does (a short plot), 0 and
    the ends rounded towards 0 to two significant digits, as many of them as fit (0 first: it is the reference).
    """
    t = theme()
    min_px = max(t.min_tick_px, 1.2 * t.tick) if min_px is None else min_px
    span = float(hi) - float(lo)
    if not span > 0 or not axis_px > 0:
        return [0.0] if lo <= 0 <= hi else []
    per = axis_px / span  # px per unit
    decade = 10.0 ** math.floor(math.log10(span / max(1, most)))
    for step in (m * decade * 10 ** e for e in range(3) for m in (1, 2, 5)):
        ticks = [round(k * step, 12) for k in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)]
        if len(ticks) < 2:
            break
        if step * per >= min_px and len(ticks) <= most:
            return ticks
    chosen: list[float] = [0.0] if lo <= 0 <= hi else []
    for v in (_round_in(hi), _round_in(lo)):
        if v != 0 and lo <= v <= hi and all(abs(v - c) * per >= min_px for c in chosen):
            chosen.append(v)
    return sorted(chosen)


def _round_in(v: float) -> float:
    """``v`` rounded towards 0 to two significant digits (stays inside the range it ends)."""
    if v == 0:
        return 0.0
    unit = 10.0 ** (math.floor(math.log10(abs(v))) - 1)
    return math.copysign(round(math.floor(abs(v) / unit + 1e-9) * unit, 12), v)


def label_px(tokens, angle: int = -45) -> int:
    """Pixels the rotated key tick labels plus the axis title take below a plot (estimate)."""
    if tokens is None:
        return 50
    t = theme()  # a character is about 0.57 font sizes wide
    longest = max((visible_len(escape_token(cut_token(tok, t.max_label_chars))) for tok in tokens), default=2)
    return int(30 + t.base + 0.57 * t.tick * min(longest, 16) * abs(math.sin(math.radians(angle))))


def heatmap_height(n_rows: int, col_tokens=None, title_lines: int = 1, angle: int = -45) -> int:
    """Height of a one-panel heatmap: ROW_PX per row plus title and key labels, clamped.

    Between MIN_HEIGHT and MAX_HEIGHT; :func:`plot_rows_px` gives the rows' share.
    ``angle`` is the key labels' rotation (see :func:`axis_ticks`).
    """
    if theme().height_px:
        return theme().height_px
    return int(min(MAX_HEIGHT, max(MIN_HEIGHT, _overhead(col_tokens, title_lines, angle)
                                   + ROW_PX * n_rows)))


def plot_rows_px(height: int, col_tokens=None, title_lines: int = 1, angle: int = -45) -> int:
    """Pixels left for the rows of a heatmap of ``height`` (see :func:`heatmap_height`)."""
    return max(1, height - _overhead(col_tokens, title_lines, angle))


def _overhead(col_tokens, title_lines: int, angle: int) -> int:
    """Title, margins and key labels of a heatmap, in pixels: the key labels as wide as plotly will find them (the
    margin it pushes, see :func:`label_margins`), so that row labels thinned for the rest do not touch in a short
    presenter figure."""
    labels = label_px(col_tokens, angle)
    if col_tokens is not None:
        t = theme()
        widest = max((text_px(escape_token(cut_token(tok, t.max_label_chars)), t.tick) for tok in col_tokens),
                     default=0)
        slant = math.radians(abs(angle))
        labels = max(labels, int(15 + 1.3 * t.base + widest * math.sin(slant) + t.tick * math.cos(slant)))
    return top_margin(title_lines) + 20 + labels


def token_axis(tokens) -> dict:
    """Axis settings of a heatmap axis whose cells are ``tokens``: a category axis (see
    :func:`viz.heatmap.heatmap_traces`)."""
    return {} if tokens is None else {"type": "category"}


def thinned_labels(layout: dict) -> str | None:
    """A sentence naming the token axes of a figure's ``layout`` (plotly's layout dict) that label only some of
    their tokens, e.g. "Only some labels fit: key 23 of 46. Hover a cell for its tokens."; None when every token
    is labelled. A token axis is one whose labels are text at whole positions over a range of cells."""
    seen = {}
    for name, axis in layout.items():
        if not (name[:5] in ("xaxis", "yaxis") and isinstance(axis, dict)):
            continue
        vals, text, span = axis.get("tickvals"), axis.get("ticktext"), axis.get("range")
        if vals is None or text is None or span is None or axis.get("showticklabels") is False:
            continue
        cells = round(abs(span[1] - span[0]))
        if not text or all(str(t) == str(v) for t, v in zip(text, vals)) or len(vals) >= cells:
            continue  # numbers (dimensions, positions), or every cell labelled
        title = axis.get("title") or {}
        text = title.get("text") if isinstance(title, dict) else title
        if not text:  # a panel's axis whose title another panel's axis carries (the same tokens)
            continue
        word = str(text).split(" (")[0].split(" ")[0]
        seen[word] = f"{word} {len(vals)} of {cells}"
    if not seen:
        return None
    return f"Only some labels fit: {', '.join(seen.values())}. Hover a cell for its tokens."


def panels_that_fit(n_panels: int, key_tokens, row_tokens, width_px: int | None = 940) -> int:
    """How many of ``n_panels`` heatmaps over ``key_tokens`` may stand side by side across a page ``width_px`` wide
    (a laptop's, as in plot_width_px) with every key labelled, in the theme in force (at least 1). Presenter mode
    shows that many at a time, and a picker for the others."""
    for cols in range(n_panels, 1, -1):
        if tick_step(len(key_tokens), plot_width_px(width_px, row_tokens, cols=cols), -90) == 1:
            return cols
    return 1
