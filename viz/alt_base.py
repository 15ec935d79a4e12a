"""What every text alternative is made of (viz/alt.py): its parts and tables, the plain-text helpers, a figure's
traces and layout as read-only views, and how an axis, its labels and a panel are named. The readers of each kind
of trace (viz/alt_traces.py, viz/alt_series.py) build on this; viz/alt.py puts their parts together.
"""
from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from viz import plotly_internals

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

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
        import pandas as pd  # where a table is made: importing viz/ needs no pandas
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


# ----------------------------------------------------------------------------- axes and labels

def trace_axes(t) -> tuple[str, str]:
    return t.xaxis or "x", t.yaxis or "y"


def layout_axis(fig: FigureView, ref: str):
    """The layout axis of a trace's axis reference ("x2" -> layout.xaxis2)."""
    return fig.layout[ref[0] + "axis" + ref[1:]]


def axis_title(fig: FigureView, ref: str) -> str:
    """The axis title of ``ref``, or (facets title only their outer axes) of the first axis of its letter that has
    one."""
    own = axis_name(layout_axis(fig, ref).title.text)
    if own:
        return own
    for key in sorted(k for k in fig.layout if k.startswith(ref[0] + "axis")):
        title = axis_name(fig.layout[key].title.text)
        if title:
            return title
    return ""


def labels(values, axis, n: int, word: str) -> list[str]:
    """The names of ``n`` cells along an axis: category names, tick labels of numeric positions, or the
    numbers themselves ("dim 17")."""
    if values is None:
        values = range(n)
    values = list(values)
    if values and isinstance(values[0], str):
        return [plain(v) for v in values]
    ticks = {float(v): plain(t) for v, t in zip(axis.tickvals or (), axis.ticktext or ())}
    whole = is_whole(np.asarray(values, dtype=np.float64))
    out = []
    for v in values:
        text = ticks.get(float(v))
        if text is None or _is_number(text):  # a bare number says more with its axis' word: "layer 2"
            text = f"{word} {text if text is not None else fmt_number(v, whole)}".strip()
        out.append(text)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def ticks_cover(axis, values) -> bool:
    """Whether the axis names every one of ``values`` with a tick label (a thinned axis names only some)."""
    named = {float(v) for v in axis.tickvals or ()} if axis.ticktext else set()
    return bool(named) and all(float(v) in named for v in values)


def panel_name(fig: FigureView, xref: str, yref: str) -> str:
    """The panel's title: the annotation centred above its plot area, with the row title beside it (a grid of
    layers × heads names both)."""
    x_dom = list(layout_axis(fig, xref).domain or (0, 1))
    y_dom = list(layout_axis(fig, yref).domain or (0, 1))
    centre, middle = sum(x_dom) / 2, sum(y_dom) / 2
    above, beside = "", ""
    for a in fig.layout.annotations or ():
        if a.xref != "paper" or a.x is None or a.y is None:
            continue
        if a.textangle in (90, -90) and abs(a.y - middle) < 1e-3:
            beside = plain(a.text)
        elif a.xanchor == "center" and a.yanchor == "bottom" and abs(a.x - centre) < 1e-3 and a.y >= y_dom[1] - 1e-3:
            if not above or abs(a.y - y_dom[1]) < 1e-3:
                above = plain(a.text)
    return ", ".join(p for p in (beside, above) if p)


def cut_rows(n_rows: int, n_cols: int) -> int:
    """How many rows of an (n_rows, n_cols) table fit MAX_TABLE_CELLS (at least one)."""
    return max(1, min(n_rows, MAX_TABLE_CELLS // max(n_cols, 1)))


def caption(what: str, kept: int, total: int) -> str:
    return what + (f" (the first {kept} of {total} rows)" if kept < total else "")


# ----------------------------------------------------------------------------- heatmaps
