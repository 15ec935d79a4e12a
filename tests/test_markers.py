"""The README's markers do what it says: `pytest -m "not browser"` selects no test that needs Chromium."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def collected(marker: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marker, "-p", "no:randomly",
                          "-n", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_not_browser_selects_no_test_that_drives_chromium():
    """Every test module that starts Chromium (its name says browser, or it uses the browser fixtures) is left out."""
    chosen = collected("not browser")
    assert chosen, "nothing collected"
    browser_modules = {p.name for p in (ROOT / "tests").rglob("test_browser*.py")}
    leaked = [t for t in chosen if t.split("::")[0].split("/")[-1] in browser_modules]
    assert leaked == [], f"browser tests selected by -m 'not browser': {leaked[:5]}"
    # `-m browser` is the rest, by pytest's own definition: one collection is enough (each takes seconds)
