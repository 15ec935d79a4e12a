"""The next page's data and figures, prepared in the background while this page is on screen.

A student types a sentence and then opens the pages one after another, so almost every click is a page's first
visit for that sentence: the server runs what the page shows (a padded batch, teacher-forced passes) and builds
its figures while the student waits. When the student opens a page, the next page of the sidebar that has
something to prepare (a `prepare(ctx, state)`) gets that done in the background, through the same caches the
page itself reads (st.cache_resource, views/plumbing/figcache.py), so its first visit finds everything ready. A page
opened while its preparation is still running waits for that computation instead of repeating it (both caches
compute a value once).

Bounded, so that one click costs the shared server about what one first visit costs (benchmarks/
bench_server_cpu.py measures it per action): one worker thread; one page ahead, and only after a page switch
(not after a new sentence, a layer or a head, which cost enough themselves); a preparation that runs the model
(a page with RUNS_MODEL) only when the page just opened had been prepared too, i.e. the student is going down
the list; at most one task waiting (a newer one replaces it); each page prepared once per sentence and choices;
nothing in presenter mode or side by side (their figures are built in another theme or layout). A preparation
that fails is dropped: the page computes as before. `ATLAS_SPEED_OFF=prefetch` turns it off (viz/speed.py).

The pages come from the router (views/plumbing/router.py), which runs this after each page: this module imports none of
them, so a page may import what it needs without importing, through here, the pages that import it.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType

import streamlit as st

from views.plumbing.state import VIEWS, Context
from viz.kinds import using_languages
from viz.speed import off
from viz.theme import Theme, using_theme

MAX_REMEMBERED = 256  # preparations remembered as done (a key of a few strings each)

_log = logging.getLogger(__name__)
_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-prefetch")
_lock = threading.Lock()
_done: OrderedDict = OrderedDict()
_waiting: tuple[Future, tuple] | None = None  # the task not started yet, and its key
_LAST_VIEW = "atlas_prefetch_view"  # session state: the view of the session's previous run


def _preparing(pages: Mapping[str, ModuleType], view: str) -> ModuleType | None:
    """The page of `view` if it has something to prepare (a `prepare(ctx, state)`), else None."""
    page = pages.get(view)
    return page if hasattr(page, "prepare") else None


def following(view: str, pages: Mapping[str, ModuleType]) -> str | None:
    """The first view after `view` in the sidebar's list whose page (in `pages`, view name → page module) has
    something to prepare (None: none)."""
    i = VIEWS.index(view) if view in VIEWS else len(VIEWS)
    return next((v for v in VIEWS[i + 1:] if _preparing(pages, v) is not None), None)


def next_page(ctx: Context, theme: Theme, pages: Mapping[str, ModuleType]) -> Future | None:
    """After a page has been drawn: prepare the next page's data and figures in the background (see the module's
    docstring for the bounds); `pages` is the router's registry, view name → page module. Returns the task, or None
    when there is nothing to prepare."""
    global _waiting
    ss = st.session_state
    view = ss.get("view", "")
    last, ss[_LAST_VIEW] = ss.get(_LAST_VIEW), view  # a session's first run is no switch: its page is still drawing
    if last in (None, view) or ctx.present or ctx.other is not None or off("prefetch"):
        return None
    target = following(view, pages)
    if target is None:
        return None
    page = pages[target]
    key = _key(target, ctx, theme, pages)
    with _lock:
        if key in _done or (getattr(page, "RUNS_MODEL", False) and _key(view, ctx, theme, pages) not in _done):
            return None
        _done[key] = True
        while len(_done) > MAX_REMEMBERED:
            _done.popitem(last=False)
        if _waiting is not None and _waiting[0].cancel():  # not started: the newer page is where the student goes
            _done.pop(_waiting[1], None)
        task = _worker.submit(_prepare, page, ctx, dict(key[-1]), theme, key)
        _waiting = (task, key)
        return task


def _key(view: str, ctx: Context, theme: Theme, pages: Mapping[str, ModuleType]) -> tuple:
    """What a page's preparation depends on: the page, the sentence and its decoding, the theme, and the session's
    choices the page reads (copies: the worker never reads the session)."""
    page = _preparing(pages, view)
    state = tuple(sorted((k, _plain(st.session_state.get(k))) for k in page.STATE)) if page else ()
    return (view, ctx.key, ctx.text, ctx.max_len, ctx.mode, ctx.shows, tuple(ctx.result.raw_tokens), theme, state)


def _prepare(page, ctx: Context, state: dict, theme: Theme, key) -> None:
    global _waiting
    with _lock:
        if _waiting is not None and _waiting[1] == key:
            _waiting = None  # started: a newer task no longer replaces it
    try:
        with using_theme(theme), using_languages(ctx.langs["src"], ctx.langs["tgt"]):
            page.prepare(ctx, state)
    except Exception:  # the page computes it again when it is opened, and says what went wrong there
        _log.warning("preparing %s failed", key[0], exc_info=True)
        with _lock:
            _done.pop(key, None)


def _plain(value):
    return tuple(value) if isinstance(value, list) else value


def wait_idle(timeout: float = 60.0) -> None:
    """Return once every preparation asked for so far has finished (the worker runs them in order)."""
    _worker.submit(lambda: None).result(timeout)
