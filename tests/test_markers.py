"""The README's markers do what it says: `pytest -m "not browser"` selects no test that needs Chromium."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from browser_support import COLLECTED

ROOT = Path(__file__).resolve().parent.parent
BROWSER_MODULES = {p.name for p in (ROOT / "tests").rglob("test_browser*.py")}


def collected_in_a_subprocess(marker: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marker, "-p", "no:randomly",
                          "-n", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def not_browser(config) -> list[str]:
    """The node ids `-m "not browser"` selects. This session's own collection answers when it holds every browser
    module (the whole suite, as `pytest` runs it): a test is selected when the marks it was collected with, the
    ones conftest adds included, lack `browser`. A run of part of the suite collects it all again in a subprocess."""
    marks = config.stash.get(COLLECTED, {})
    if BROWSER_MODULES <= {node.split("::")[0].split("/")[-1] for node in marks}:
        return [node for node, names in marks.items() if "browser" not in names]
    return collected_in_a_subprocess("not browser")


def test_not_browser_selects_no_test_that_drives_chromium(request):
    """Every test module that starts Chromium (its name says browser, or it uses the browser fixtures) is left out."""
    chosen = not_browser(request.config)
    assert chosen, "nothing collected"
    leaked = [t for t in chosen if t.split("::")[0].split("/")[-1] in BROWSER_MODULES]
    assert leaked == [], f"browser tests selected by -m 'not browser': {leaked[:5]}"
    # `-m browser` is the rest, by pytest's own definition: one collection is enough (each takes seconds)

