"""The next page's work, done in the background while the student looks at this one.

Three pages cost the server most on their first visit for a sentence: Inside one head (four rows of one head's steps),
Masks (a padded batch, a reference, two teacher-forced passes, five panels) and Decoding (ALTI+ along the decoding,
the gradients of one step's attribution, four figures). A class goes down the sidebar's list of pages, so after a
switch the router hands `after` the `ahead(ctx)` of the first of them below the page on screen: it reads the session
(in the run's own thread) and returns the calls its first visit will make, and one worker thread makes them once
that run has ended, in its theme and languages, through the same shared caches (views/plumbing/state.py, the figure
cache). The page then finds its answers there, or waits for the one being computed instead of computing it again.

The work is a guess, so it must not slow what is certain: the worker starts after the run that asked (before, it
competed for the interpreter with the page's last messages), and it runs at the lowest priority, so it takes only
the processor time that the browser drawing the page (on the same machine in a measurement, or on a lecturer's
laptop) and other sessions' requests leave. At the server's priority it slowed the page that started it
(docs/performance.md). A low priority alone would invert priorities: a page asking for an answer the worker is
computing waits for it (the caches compute each answer once), and on a busy server the worker gets little time. So
the worker stops at the next call once any session's run has started (the page makes the rest itself): at most one
call is ever waited for.

Bounded for a shared server: one worker for the process; at most one task waiting behind the running one (a click
while both slots are taken prepares nothing: the page computes as before); only after a switch, never in presenter
mode or side by side (their figures are laid out for another screen or for two sides). A task that fails is
dropped: the page computes the same calls and says what went wrong there. Nothing of a request is kept here once
its task has run. `ATLAS_SPEED_OFF=ahead` turns it off (viz/speed.py), which is how it is measured
(docs/performance.md).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from views.plumbing.streamlit_internals import runs_in_flight
from viz.kinds import languages, using_languages
from viz.speed import off
from viz.theme import theme, using_theme

_log = logging.getLogger(__name__)
LOWEST_PRIORITY = 19  # the worker's nice value: it takes only the processor time that nothing else wants


def _yield_to_everything() -> None:
    """Lower the worker thread's priority to the lowest: work made ahead is a guess, and must not slow the browser
    drawing the page that asked for it (on the same machine in a classroom's lecturer laptop, and in the
    measurement) nor another session's request. Linux only, where a nice value belongs to one thread (elsewhere
    the same call would name a process)."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)
        except OSError:  # not allowed here: the work is still made, at the server's priority
            _log.info("the ahead worker keeps the server's priority", exc_info=True)


_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-ahead", initializer=_yield_to_everything)
_slots = threading.BoundedSemaphore(2)  # the running task and one waiting
RUN_END_WAIT_S = 10.0  # the longest a task waits for the run that asked for it to end


def after(calls: Callable[[], list[Callable[[], object]]]) -> Future | None:
    """Make the next page's calls in the worker: `calls` is its `ahead`, asked here, in the run's thread, for what
    its first visit will make. None when there is nothing to do, the device is off, or both slots are taken; a page
    whose `ahead` fails is left to compute on its visit (the page on screen is not disturbed)."""
    if off("ahead"):
        return None
    try:
        todo = calls()
    except Exception:
        _log.warning("listing the next page's work failed", exc_info=True)
        return None
    if not todo or not _slots.acquire(blocking=False):
        return None
    run = threading.current_thread()  # Streamlit's thread of this run: it ends with the run
    try:
        return _worker.submit(_run, todo, theme(), languages(), None if run is threading.main_thread() else run)
    except RuntimeError:  # the interpreter is shutting down
        _slots.release()
        return None


def _run(todo: list[Callable[[], object]], look, langs: tuple[str, str], run: threading.Thread | None) -> None:
    try:
        if run is not None:  # the page that asked sends its last messages first: they would wait for the interpreter
            run.join(RUN_END_WAIT_S)
        with using_theme(look), using_languages(*langs):
            for call in todo:
                if runs_in_flight():  # certain work came in: the guess yields to it
                    return
                call()
    except Exception:  # the page makes the same call when it is opened and says what went wrong there
        _log.warning("preparing the next page failed", exc_info=True)
    finally:
        _slots.release()


def wait_idle(timeout: float = 60.0) -> None:
    """Return once every task submitted so far has run (the worker runs them in order)."""
    _worker.submit(lambda: None).result(timeout)
