"""Limits that protect a shared server from heavy jobs started from the page."""
from __future__ import annotations

import threading
from contextlib import contextmanager

MAX_HEAVY_JOBS = 1  # ablations over the validation sample running at once, for the whole server
ABLATION_SENTENCES = 100  # validation sentences per ablation measurement

_slots = threading.BoundedSemaphore(MAX_HEAVY_JOBS)


@contextmanager
def heavy_job_slot():
    """Yields True with a slot held, or False at once when all slots are busy (never waits)."""
    got = _slots.acquire(blocking=False)
    try:
        yield got
    finally:
        if got:
            _slots.release()
