"""pandas is imported after a server's first page, not before it.

pandas (and the pyarrow that st.table converts through) takes 0.3–0.4 s of CPU to import, which a cold start on two
cores waits for in full: the first run imports torch too, and Chromium compiles Plotly's code on the other core.
The first page needs none of it (the pages' tables are Markdown), so a server's first script run goes without,
and pandas is imported in a background thread as soon as that run has ended.

Why every other script run waits for that import at its start (`enter`): Plotly never imports pandas, it looks it up
in sys.modules while it builds and writes a figure, and a module that another thread is still importing is already
there, half made ("partially initialized module 'pandas' has no attribute 'Series'"). So no thread may work with
Plotly while pandas is being imported:
- the first run never overlaps the import (the import starts once it has ended; if that run's own page imports
  pandas, nobody else runs meanwhile);
- every other run waits in `enter` until pandas is whole: a crowd's first runs would wait for the first run's model
  anyway;
- a thread that the first run leaves behind (a download's callback) calls `wait` first.
The first run ends for this module when `leave` is called (every exit of app.py), when its thread starts another run,
or when its thread is gone (a run that failed): whichever comes first.

Nothing here imports pandas before that: this module imports only the standard library (and viz/speed.py, whose
switch turns the gate off).
"""
from __future__ import annotations

import logging
import sys
import threading

from viz.speed import off

WAIT_S = 120.0  # a first run on a busy two-core machine can take 30 s; past this, go on rather than hang
_POLL_S = 0.05

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_ready = threading.Event()  # set once pandas is whole in sys.modules (or failed to import: nothing to wait for)
_left = threading.Event()  # set when the first run has ended
_first: threading.Thread | None = None  # the thread of the process's first run


def enter() -> bool:
    """At the start of every script run. True for the process's first run, which goes on without pandas; any other
    run returns once pandas is whole (at once on a warm server)."""
    global _first
    if _ready.is_set():
        return False
    if off("pandas_gate"):  # the plain way: every run imports pandas first (the first run waits for it too)
        _import()
        return False
    me = threading.current_thread()
    with _lock:
        if _first is None and "pandas" in sys.modules:  # imported already (by whoever): wait until it is whole
            _import()
            return False
        if _first is None:
            _first = me
            threading.Thread(target=_after_first_run, args=(me,), name="atlas-pandas", daemon=True).start()
            return True
    if me is _first:  # the first run's thread starts another run: the first one has ended
        _left.set()
    wait()
    return False


def leave() -> None:
    """At every end of a script run: after the first run, pandas is imported in the background."""
    if threading.current_thread() is _first:
        _left.set()


def ready() -> bool:
    """True once pandas may be imported and used by anyone (st.table, a DataFrame) without making others wait."""
    return _ready.is_set()


def wait() -> None:
    """Return once pandas is whole, at once for the first run's own thread (which never overlaps its import)."""
    if _ready.is_set() or threading.current_thread() is _first and not _left.is_set():
        return
    if not _ready.wait(WAIT_S):
        _log.warning("pandas was not imported %.0f s after the first run started; going on", WAIT_S)


def _after_first_run(first: threading.Thread) -> None:
    while not _left.wait(_POLL_S):
        if not first.is_alive():
            break
    _import()


def _import() -> None:
    try:
        import pandas  # noqa: F401  (waits for another thread's import of it to finish)
    except Exception:  # the pages that need it say so; nobody should wait for it any longer
        _log.warning("importing pandas failed", exc_info=True)
    finally:
        _ready.set()
