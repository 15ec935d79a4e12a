"""A timing log of the server's script runs and background preparations, for profiling a walk.

    PYTHONPATH=benchmarks/timing_hook ATLAS_TIMING_LOG=/tmp/runs.log python benchmarks/bench_floor.py --walks 1
    python benchmarks/server_timeline.py /tmp/runs.log

Python imports `sitecustomize` at start-up from the path, so every process started with this folder on PYTHONPATH
(the benchmark's servers among them) appends one line per event to ATLAS_TIMING_LOG: the wall clock, the thread and
"run start" / "run end" around each Streamlit script run, "prep start NAME" / "prep end NAME" around each page
prepared by views/prefetch.py. Without ATLAS_TIMING_LOG it does nothing. Not for the app itself: it wraps
Streamlit's private ScriptRunner._run_script once Streamlit has imported it.
"""
from __future__ import annotations

import os
import sys
import threading
import time

LOG = os.environ.get("ATLAS_TIMING_LOG")


def _write(event: str) -> None:
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(f"{time.time():.3f}\t{threading.current_thread().name}\t{event}\n")


def _timed(fn, start: str, end: str):
    def wrapper(*args, **kwargs):
        _write(start(*args))
        try:
            return fn(*args, **kwargs)
        finally:
            _write(end(*args))
    return wrapper


def _install() -> None:
    """Wrap the script runner and the prefetch worker as soon as each module is loaded (polled: no import hooks)."""
    runner = prefetch = None
    for _ in range(60_000):  # ten minutes
        m = sys.modules.get("streamlit.runtime.scriptrunner.script_runner")
        if runner is None and m is not None and hasattr(m, "ScriptRunner"):  # a module being imported lacks it
            runner = m.ScriptRunner
            runner._run_script = _timed(runner._run_script, lambda *a: "run start", lambda *a: "run end")
        if prefetch is None and (m := sys.modules.get("views.prefetch")) and hasattr(m, "_prepare"):
            prefetch = m
            m._prepare = _timed(m._prepare, lambda page, ctx, state, theme, key: f"prep start {key[0]}",
                                lambda page, ctx, state, theme, key: f"prep end {key[0]}")
        if runner is not None and prefetch is not None:
            return
        time.sleep(0.01)


if LOG:
    threading.Thread(target=_install, name="atlas-timing-hook", daemon=True).start()
