"""Figures built once and kept: `cached(builder, *args, **kwargs)` instead of `builder(*args, **kwargs)`.

Building a Plotly figure is most of the cost of a page (mostly Plotly's validation; sending a built one costs a
small part of that). The key is the builder and the *content* of its arguments (arrays are hashed byte for byte,
token lists and numbers as they are) plus the viz theme and speed switches in force (viz/speed.py), so a cached figure
is exactly the one the builder would return now: there is no list of dependencies to forget. One cache serves every
session; its figures are never modified after building (Streamlit copies a figure before sending it).

What the cache keeps of a figure is a light stand-in (`_Prebuilt`) and, beside it, a :class:`Kept`: the JSON a chart
gets, the text alternative and the note on thinned labels (`views.parts.widgets.chart` reads them with
:func:`kept_with`). Beside it, not on it: a side table keyed by the light figure's identity (`viz.alt.ByFigure`), so no
attribute of our own hangs on a Plotly object (tests/test_private_names.py), the JSON stays the figure's own (nothing
to strip before it reaches the browser), and a cached figure still comes back with its text: the table keeps the
record exactly as long as the figure lives (in this cache, shared read-only by every session, or in the run that drew
a figure built outside it). Why not Plotly's `layout.meta`, or a record returned instead of the figure: viz/alt.py.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go

from views.plumbing.streamlit_internals import serve_kept_json
from viz import plotly_internals
from viz.alt import Alt, ByFigure, describe
from viz.kinds import languages
from viz.speed import off, switched_off
from viz.theme import theme
from viz.token_axes import thinned_labels
from viz.transport import browser_json

MAX_FIGURES = 160  # LRU; a figure object is ~0.1-0.5 MB, the vocabulary map ~1 MB


class _Unhashable(Exception):
    pass


def _key(value):
    """A hashable stand-in for an argument, equal exactly when the content is equal."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        return ("nd", a.dtype.str, a.shape, hashlib.blake2b(a.view(np.uint8).reshape(-1) if a.size else b"",
                                                            digest_size=16).hexdigest())
    if isinstance(value, (list, tuple)):
        if len(value) > 16 and all(type(v) is str for v in value):  # token lists, a vocabulary: hash them at once
            joined = "\x1f".join(value).encode("utf-8", "surrogatepass")
            return (type(value).__name__, "strs", len(value), hashlib.blake2b(joined, digest_size=16).hexdigest())
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _key(v)) for k, v in value.items())))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(_key(v) for v in value)))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__, tuple((f.name, _key(getattr(value, f.name)))
                                                for f in dataclasses.fields(value)))
    raise _Unhashable(type(value).__name__)


class _FrozenDict(dict):
    """A kept figure's dict with its JSON computed once (see _json)."""

    json: str


@dataclasses.dataclass(frozen=True)
class Kept:
    """What the cache keeps with a light figure: its dict (with its JSON), its text alternative (`viz.alt`) and the
    sentence naming its thinned token axes (`viz.token_axes.thinned_labels`; None when every token is labelled)."""

    dict: _FrozenDict
    alt: Alt | None
    thinned: str | None


_KEPT: ByFigure[Kept] = ByFigure()  # light figure -> its Kept, for as long as the light figure lives


def kept_with(figure) -> Kept | None:
    """What was kept with a figure `drawable` returned (None for anything else)."""
    return _KEPT.get(figure)


class _Prebuilt(go.Figure):
    """What `st.plotly_chart` gets for a kept figure: Streamlit calls `to_dict()` (for a heatmap that walks every
    hover label again), reads the layout's width and height, and serialises the dict (answered by
    _json). This empty figure hands over the kept dict instead."""

    def to_dict(self):
        return _KEPT.get(self).dict


# st.plotly_chart serialises a kept figure's dict through plotly.io.to_json on every run: answered from the kept
# JSON (views/plumbing/streamlit_internals.py; tests/views/test_figcache_contract.py pins the call).
serve_kept_json(_FrozenDict)


def _prebuilt(figure, revision: str):
    """Keep only what Streamlit reads of a built figure: its JSON, and the width and height of its layout.

    The figure object itself (its validated properties, typed arrays and hover labels) is left to the garbage
    collector: keeping it as well tripled the memory of the cache. The JSON is the one that a chart draws once
    (`viz.transport.browser_json`), with `revision` as its datarevision: a name for the content."""
    if isinstance(figure, go.Figure):
        # Its text alternative (views.parts.widgets.chart shows it), read from the figure's data before that is dropped.
        alt = describe(figure)
        layout = figure.layout
        sent = browser_json(figure, revision)
        if off("figcache"):  # Plotly's to_json writes what Streamlit sends (serve_kept_json off): the whole figure
            kept = _FrozenDict(json.loads(sent))
        else:
            kept = _FrozenDict(layout={k: layout[k] for k in ("width", "height") if layout[k] is not None})
        kept.json = sent
        light = _Prebuilt(layout={"template": {}})  # an empty template: plotly would deep-copy its default into it
        # the thinned-labels note is said under the chart (widgets)
        _KEPT.put(light, Kept(kept, alt, thinned_labels(plotly_internals.layout(figure))))
        return light
    if isinstance(figure, dict):  # a builder that returns several figures by name
        return {name: _prebuilt(value, f"{revision}:{name}") for name, value in figure.items()}
    return figure


def _revision(key) -> str:
    """A name for a cache key, and so for the content of the figure it builds (equal keys: equal content)."""
    return hashlib.blake2b(repr(key).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def drawable(figure):
    """What `st.plotly_chart(..., theme=None)` gets for a figure: a kept one as it is, any other (a toy run's
    live figures) prepared the same way under a name of its own (so a chart handed it is drawn again)."""
    if isinstance(figure, _Prebuilt) or not isinstance(figure, go.Figure):
        return figure
    return _prebuilt(figure, uuid.uuid4().hex)


class FigureCache:
    def __init__(self, max_items: int = MAX_FIGURES):
        self.max_items = max_items
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict = {}  # key -> an Event set when the thread building that figure is done
        self.hits = self.misses = 0

    def get(self, builder: Callable, *args, **kwargs):
        try:
            key = (builder.__module__, builder.__qualname__, theme(), languages(), frozenset(switched_off()),
                   _key(args), _key(kwargs))
        except _Unhashable:
            return builder(*args, **kwargs)  # an argument we cannot compare: build every time, never guess
        for _ in range(2):  # once more if the other builder failed or its figure was evicted already
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return self._items[key]
                other = self._building.get(key)
                if other is None:
                    done = self._building[key] = threading.Event()
                    break
            # Another thread (another session) is building this very
            # figure:
            # wait for it rather than build it a second time beside it.
            other.wait(timeout=60)
        else:
            return _prebuilt(builder(*args, **kwargs), _revision(key))
        try:  # outside the lock: other figures are built meanwhile
            figure = _prebuilt(builder(*args, **kwargs), _revision(key))
            with self._lock:
                self.misses += 1
                self._items[key] = figure
                self._items.move_to_end(key)
                while len(self._items) > self.max_items:
                    self._items.popitem(last=False)
            return figure
        finally:
            with self._lock:
                self._building.pop(key, None)
            done.set()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


FIGURES = FigureCache()


def cached(builder: Callable, *args, **kwargs):
    """builder(*args, **kwargs), built once per distinct content of the arguments (and theme), then shared."""
    return FIGURES.get(builder, *args, **kwargs)
