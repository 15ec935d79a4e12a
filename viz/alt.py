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

What goes with a figure is kept beside it, in a side table keyed by the figure object's identity
(:class:`ByFigure`), never as an attribute of our own on the Plotly object (tests/test_private_names.py). A side
table, because it means exactly what an attribute meant: bound to that object (a copy of the figure has none, as
a copy had no attribute), gone with it (the table holds the figure by a weak reference), and nothing in the
figure's data, so the JSON a browser gets is byte for byte the same. Carrying the ``Alt`` in ``layout.meta``
instead would put a record with NumPy tables into Plotly's data: validated and deep-copied with the layout, and
written by every ``to_json`` (an error, or text sent to the browser) unless each writer stripped it; returning a
record (figure, alt) from the builders would change what every builder and ``cached()`` returns, for the pages,
the lesson exporter and the tests. views/plumbing/figcache.py keeps its light figures' JSON, text alternative and
thinned-labels note in a table of this kind too.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
import plotly.graph_objects as go

from viz.alt_base import (  # noqa: F401  (Alt, Table, plain and fmt_number are this module's API too)
    Alt,
    FigureView,
    Table,
    clip_summary,
    fmt_number,
    listing,
    plain,
)
from viz.alt_traces import trace_parts

if TYPE_CHECKING:
    pass

V = TypeVar("V")


class ByFigure(Generic[V]):
    """A side table: a value kept with a figure object, found again by that very object (its identity), and
    dropped when the object is (a weak reference with a callback). See the module docstring for why.

    One table serves every thread and session, as the figure cache does: it is written when a figure is built
    and read when one is drawn; each step is a single dict operation (atomic in CPython), and no lock is taken,
    since a weak reference's callback may run in any thread, amid any allocation."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, V]] = {}

    def put(self, fig: object, value: V) -> None:
        key = id(fig)
        entries = self._entries

        def forget(ref: weakref.ref) -> None:  # runs while the object is being freed, before its id can be reused
            if entries.get(key, (None,))[0] is ref:
                entries.pop(key, None)

        entries[key] = (weakref.ref(fig, forget), value)

    def get(self, fig: object, default: V | None = None) -> V | None:
        entry = self._entries.get(id(fig))
        return entry[1] if entry is not None and entry[0]() is fig else default

    def __len__(self) -> int:
        return len(self._entries)


_ATTACHED: ByFigure[Alt] = ByFigure()  # the text alternatives builders attach (with_alt)


def with_alt(fig: go.Figure, alt: Alt) -> go.Figure:
    """Keep ``alt`` with ``fig`` (:func:`describe` returns it, and the app's figure cache keeps it); returns
    ``fig``."""
    _ATTACHED.put(fig, alt)
    return fig


def describe(fig: go.Figure) -> Alt:
    """The text alternative of ``fig``: the one a builder attached (:func:`with_alt`), or one read from its
    traces (heatmaps, bars, lines, dots, boxes) and its title and notes."""
    attached = _ATTACHED.get(fig)
    if attached is not None:
        return attached
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
