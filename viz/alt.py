"""Text alternatives of the figures: what a chart shows, in words and as a table of its numbers.

A screen-reader user, a reader of a washed-out projector and a student who wants the exact numbers all need the
same thing: the values the figure was drawn from, said plainly. :func:`describe` reads them from the figure's own
traces (the arrays Plotly draws), so the text can never disagree with the picture:

- a heatmap: its size and range, and for each row (a query) the columns (keys) with the largest values;
  masked cells are counted and named as masked;
- bars: every category with its value, largest first in the summary, and which bar is highlighted;
- lines: each line's start, end, lowest and highest point, and for a wave its period;
- dots: how many, and the labelled ones with their coordinates.

A builder whose figure needs other words (a grid of thumbnails drawn as one heatmap) attaches its own with
:func:`with_alt`. ``Alt.summary`` is short (the chart's accessible name); ``details`` and ``tables`` are shown on
demand under the chart. Text here is plain (no Plotly HTML, no Markdown); numbers use 3 decimals like the figures.
"""
from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz import plotly_internals

if TYPE_CHECKING:
    import pandas as pd

# A table keeps at most this many cells (rows are cut, and the caption says so): the page's CSV buttons have
# every number, and a table of a 100 × 256 matrix would take the browser seconds to lay out.
MAX_TABLE_CELLS = 6_000
MAX_DETAIL_ROWS = 40  # rows described one by one; the table has the rest
TOP_K = 2  # strongest columns named per heatmap row
SUMMARY_CHARS = 600  # the accessible name stays short enough to be read out in one go


@dataclass(frozen=True)
class Table:
    """The numbers of one panel: ``values`` (r, c) with row and column labels; ``marks`` (r, c) text shown instead
    of a number where it is not empty ("masked"). ``total_rows``: rows before the cut to MAX_TABLE_CELLS."""

    caption: str
    index_name: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    values: np.ndarray
    marks: np.ndarray | None = None
    total_rows: int = 0

    def frame(self) -> pd.DataFrame:
        """The table as text cells (numbers written as in the figures), one column per column label."""
        import pandas as pd  # on first use: a server's first page needs none (views/pandas_gate.py)
        values = np.asarray(self.values, dtype=np.float64)
        cells = np.empty(values.shape, dtype=object)
        for c in range(values.shape[1]):  # a column of counts is written without decimals
            whole = is_whole(values[:, c])
            cells[:, c] = [fmt_number(v, whole) for v in values[:, c]]
        if self.marks is not None:
            cells = np.where(self.marks != "", self.marks, cells)
        frame = pd.DataFrame(cells, columns=list(unique(self.columns)), index=list(unique(self.rows)))
        frame.index.name = self.index_name or None
        return frame


@dataclass(frozen=True)
class Alt:
    """A figure's text alternative: a short ``summary``, longer ``details`` (lines) and its numbers."""

    summary: str
    details: tuple[str, ...] = ()
    tables: tuple[Table, ...] = field(default=())


@dataclass
class Part:
    """What one trace (a panel, a line, a set of bars) contributes to its figure's text; ``short``: its summary
    when it follows another part of the same figure (the second of four heads need not repeat the axes)."""

    summary: str
    details: list[str]
    table: Table | None = None
    short: str = ""


# ----------------------------------------------------------------------------- text

_TAG = re.compile(r"<[^>]+>")


def plain(text: object) -> str:
    """Plotly text as plain text: line breaks become spaces, tags go, entities (``&lt;``) are decoded."""
    if text is None:
        return ""
    s = re.sub(r"<br\s*/?>", " ", str(text), flags=re.IGNORECASE)
    return " ".join(html.unescape(_TAG.sub("", s)).split())


def axis_name(title: str) -> str:
    """An axis title without its reading arrows: "query (EN) ↓" -> "query (EN)"."""
    return " ".join(plain(title).replace("↓", " ").replace("→", " ").replace("←", " ").split())


def fmt_number(v: float, whole: bool = False) -> str:
    """A number as the figures write it: 3 decimals (``<0.001`` for a tiny positive one, as ``fmt_prob``), large
    ones without; ``whole``: an integer (a count). NaN (no value) gives ""."""
    v = float(v)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "infinite" if v > 0 else "minus infinite"
    if whole or abs(v) >= 1000:
        return f"{v:,.0f}"
    if 0 < v < 0.0005:
        return "<0.001"
    return f"{v:.3f}"


def is_whole(values: np.ndarray) -> bool:
    """Whether every finite value is an integer (counts, a 0/1 mask): then they are written without decimals."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return bool(v.size) and bool(np.all(v == np.round(v)))


def unique(labels: Sequence[str]) -> list[str]:
    """Labels made unique by a counter where they repeat (a table cannot have two columns of one name)."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen.get(label, 0)
        seen[label] = n + 1
        out.append(label if n == 0 else f"{label} #{n + 1}")
    return out


def clip_summary(text: str, limit: int = SUMMARY_CHARS) -> str:
    """Cut a summary at a sentence or word end before ``limit`` characters."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " …"


def listing(items: Sequence[str], limit: int = 6) -> str:
    """"a, b and c", or the first ``limit`` and how many more."""
    items = list(items)
    if len(items) > limit:
        return ", ".join(items[:limit]) + f" and {len(items) - limit} more"
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + (items[-1] if items else "")


# ----------------------------------------------------------------------------- figures

class Raw:
    """Attribute access to a figure's raw dicts (viz.plotly_internals, which viz.transport reads too):
    Plotly's own property access cost several times more than building the text. A missing key reads None, a
    missing or plain-string ``title`` reads as a title dict, ``raw[key]`` a missing dict as an empty one."""

    __slots__ = ("_d",)

    def __init__(self, d: dict):
        self._d = d

    def __getattr__(self, key: str):
        return self._wrap(self._d.get(key), key)

    def __getitem__(self, key: str) -> Raw:
        return Raw(self._d.get(key) or {})

    def __iter__(self):
        return iter(self._d)

    @staticmethod
    def _wrap(value, key: str = ""):
        if key == "title" and not isinstance(value, dict):
            value = {"text": value}
        if isinstance(value, dict):
            return Raw(value)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
            return [Raw(v) for v in value]
        return value


class FigureView:
    """A figure's traces and layout as :class:`Raw` (what the readers of viz.alt_traces take)."""

    def __init__(self, fig: go.Figure):
        self.data = [Raw(t) for t in plotly_internals.traces(fig)]
        self.layout = Raw(plotly_internals.layout(fig))


def with_alt(fig: go.Figure, alt: Alt) -> go.Figure:
    """Attach ``alt`` to ``fig`` (kept with the figure in the app's figure cache); returns ``fig``."""
    fig._atlas_alt = alt
    return fig


def describe(fig: go.Figure) -> Alt:
    """The text alternative of ``fig``: the one a builder attached (:func:`with_alt`), or one read from its
    traces (heatmaps, bars, lines, dots, boxes) and its title and notes."""
    attached = getattr(fig, "_atlas_alt", None)
    if attached is not None:
        return attached
    from viz.alt_traces import trace_parts  # the per-trace readers need the text helpers above

    fig = FigureView(fig)
    title = plain(fig.layout.title.text) or "Figure"
    parts = trace_parts(fig)
    notes = [n for n in figure_notes(fig) if n]
    if not parts:
        what = f"Diagram: {listing(notes, 12)}." if notes else "No data."
        return Alt(clip_summary(f"{title}. {what}"), tuple(notes))
    summary = f"{title}. {parts[0].summary} " + " ".join(p.short or p.summary for p in parts[1:])
    details: list[str] = []
    for p in parts:
        details.extend(p.details)
    if notes:
        details.append("Notes on the figure: " + "; ".join(notes) + ".")
    return Alt(clip_summary(summary), tuple(details), tuple(p.table for p in parts if p.table is not None))


def figure_notes(fig: FigureView) -> list[str]:
    """The figure's annotations that are not panel or axis titles (those are read with their panels)."""
    out = []
    for a in fig.layout.annotations or ():
        text = plain(a.text)
        if text and not (a.xref == "paper" and a.yanchor == "bottom" and a.xanchor == "center") \
                and a.textangle not in (90, -90):
            out.append(text)
    return out


def grid_alt(probs: np.ndarray, title: str, row_word: str = "layer", col_word: str = "head",
             query_word: str = "query", key_word: str = "key") -> Alt:
    """Text alternative of a grid of attention maps ``probs`` (L, h, i, j) drawn as thumbnails: for each panel,
    how focused its rows are (the mean of each row's largest weight) and the key position it attends to most."""
    p = np.asarray(probs, dtype=np.float64)
    n_l, n_h, n_q, n_k = p.shape
    peak = np.nanmax(np.where(np.isfinite(p), p, -np.inf), axis=-1)  # (L, h, i): each row's largest weight
    focus = np.nanmean(np.where(np.isfinite(peak), peak, np.nan), axis=-1)  # (L, h)
    favourite = np.nanargmax(np.nan_to_num(np.nansum(p, axis=-2), nan=-1.0), axis=-1)  # (L, h): column sums
    cells = [(layer, h) for layer in range(n_l) for h in range(n_h)]
    sharpest = max(cells, key=lambda c: focus[c])
    broadest = min(cells, key=lambda c: focus[c])
    def name(c: tuple[int, int]) -> str:
        return f"{row_word} {c[0] + 1} {col_word} {c[1] + 1}"
    summary = (f"{title}. {n_l} {row_word}s × {n_h} {col_word}s, each a map of {n_q} {query_word} rows × {n_k} "
               f"{key_word} columns. Most focused: {name(sharpest)} (its rows' largest weights average "
               f"{fmt_number(focus[sharpest])}); most spread out: {name(broadest)} ({fmt_number(focus[broadest])}).")
    details = [f"For each {row_word} and {col_word}: the mean of each {query_word}'s largest weight (1 = every "
               f"{query_word} looks at one {key_word}), and the {key_word} position that gets the most weight in all."]
    details += [f"{row_word} {layer + 1}, {col_word} {h + 1}: {fmt_number(focus[layer, h])}, {key_word} position "
                f"{favourite[layer, h]}" for layer, h in cells]
    table = Table(f"{title}: per {row_word} and {col_word}", f"{row_word}, {col_word}",
                  tuple(f"{row_word} {layer + 1}, {col_word} {h + 1}" for layer, h in cells),
                  ("mean largest weight", f"most attended {key_word} position"),
                  np.array([[focus[c], favourite[c]] for c in cells], dtype=np.float64), total_rows=len(cells))
    return Alt(clip_summary(summary), tuple(details), (table,))
