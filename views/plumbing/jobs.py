"""Limits that protect a shared server from heavy jobs started from the page, and jobs that outlive a click.

A heavy job holds one of MAX_HEAVY_JOBS slots for the whole server. A short one (the ablation panel's BLEU)
runs inside the user's script with `heavy_job_slot()`. A long one (a head report: minutes) runs in a
background thread with `start_job()`, so that it survives the user switching pages, and any session can read
its progress with `job()`. The thread never calls Streamlit: it only fills in its Job record.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

MAX_HEAVY_JOBS = 1  # ablations over the validation sample or head reports running at once, for the whole server
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


@dataclass
class Job:
    """What a background job has done so far (written by its thread, read by any session)."""

    name: str
    what: str  # in words, for the message other sessions see
    started: float = field(default_factory=time.monotonic)
    fraction: float = 0.0
    message: str = "starting"
    done: bool = False
    error: str | None = None  # set when it failed: a message for the page
    result: object = None  # what the work returned

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float | None:
        """Seconds left at the pace so far (None before there is a pace to go by)."""
        if self.done or self.fraction < 0.02:
            return None
        return self.elapsed * (1.0 - self.fraction) / self.fraction


_jobs: dict[str, Job] = {}
_jobs_lock = threading.Lock()


def job(name: str) -> Job | None:
    """The latest job of that name (running or finished), if any."""
    with _jobs_lock:
        return _jobs.get(name)


def running_jobs() -> list[Job]:
    with _jobs_lock:
        return [j for j in _jobs.values() if not j.done]


def start_job(name: str, what: str, work: Callable[[Callable[[float, str], None]], object]) -> Job | None:
    """Run `work(progress)` in a background thread holding a heavy-job slot; None when every slot is busy.

    A job of the same name that is still running is returned instead of starting a second one.
    `progress(fraction, message)` records how far it got; an exception becomes `Job.error` (its message only).
    """
    with _jobs_lock:
        current = _jobs.get(name)
        if current is not None and not current.done:
            return current
        if not _slots.acquire(blocking=False):
            return None
        record = _jobs[name] = Job(name, what)

    def progress(fraction: float, message: str) -> None:
        record.fraction, record.message = min(max(float(fraction), 0.0), 1.0), message

    def run() -> None:
        try:
            record.result = work(progress)
            record.fraction, record.message = 1.0, "done"
        except Exception as e:  # reported on the page, never as a trace
            record.error = f"{type(e).__name__}: {e}"
        finally:
            record.done = True
            _slots.release()

    threading.Thread(target=run, name=f"atlas-job-{name}", daemon=True).start()
    return record
