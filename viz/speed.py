"""The speed layer's switches: every device that makes a page faster by going around a framework's public API, by
doing in Python what the browser would measure, or by working ahead of a click, can be turned off on its own.

    ATLAS_SPEED_OFF=look,axis_notes   those devices off (`all`: every one)
    ATLAS_PUBLIC_ONLY=1               every device that uses a private Plotly or Streamlit name off (PRIVATE)

Off, a page draws the same content through the frameworks' public way, only slower. That is how each device is
measured against the app without it (benchmarks/bench_pages.py --baseline ref=off:NAME) and how an upgrade that
breaks one degrades to slower, never to blank. Only the standard library here.
"""
from __future__ import annotations

import os

DEVICES = {
    "plotly": "Plotly's private names: raw traces and layout, figures built unvalidated (viz/plotly_internals.py)",
    "streamlit": "Streamlit's private names: the run's history flag, CSS by test id "
                 "(views/plumbing/streamlit_internals.py)",
    "figcache": "a kept figure's JSON answers Streamlit's to_json call (views/plumbing/streamlit_internals.py)",
    "look": "Streamlit's chart look written into each figure, so a chart is drawn once (viz/look.py)",
    "axis_notes": "axis titles as notes past the labels, so Plotly measures no label (viz/axis_notes.py)",
    "ahead": "the next page's model work and figures made in the background after a switch "
             "(views/plumbing/ahead.py)",
}
PRIVATE = ("plotly", "streamlit", "figcache")


def switched_off() -> set[str]:
    """The devices the environment turns off (a name not in DEVICES is refused: a typo would measure nothing)."""
    names = {n.strip() for n in os.environ.get("ATLAS_SPEED_OFF", "").split(",") if n.strip()}
    if "all" in names:
        names = set(DEVICES)
    if unknown := names - set(DEVICES):
        raise ValueError(f"ATLAS_SPEED_OFF names no device {sorted(unknown)}; the devices: {', '.join(DEVICES)}")
    if os.environ.get("ATLAS_PUBLIC_ONLY", "") not in ("", "0"):
        names |= set(PRIVATE)
    return names


def off(device: str) -> bool:
    """True when `device` (a key of DEVICES) is switched off; read at each call, so a test may switch it."""
    assert device in DEVICES, device
    return device in switched_off()
