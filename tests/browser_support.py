"""Real-browser helpers: `streamlit run app.py` on a free port, Debian's Chromium through Playwright.

As in Streamlit's own e2e suite: start the server, poll `/_stcore/health`, and wait for
`[data-testid='stApp'][data-test-script-state='notRunning']` before asserting. One server and one
browser serve a whole test session; every test gets a fresh page (a fresh Streamlit session).

The plain functions (free_port, start_server, stop_server, launch_chromium, wait_*) are also used by
the scripts in benchmarks/; the pytest fixtures at the bottom are imported by tests/browser/test_browser.py.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from browser_js import CHARTS_DRAWN_JS, LAID_OUT_JS, RUN_COUNTER_JS, SETTLED_JS

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-dev-shm-usage"]
# The tests' browser has no optimising JavaScript compilers: a test's page lives for seconds, too short to repay them
# (a tenth of Chromium's CPU per page on 2 cores). The benchmarks keep a user's browser (CHROMIUM_ARGS).
TEST_CHROMIUM_ARGS = [*CHROMIUM_ARGS, "--js-flags=--no-opt --no-maglev"]
MISSING_CHROMIUM = (f"Chromium is not installed at {CHROMIUM}. The browser tests drive Debian's Chromium "
                    "(Playwright's own browser download is not used): run `apt-get install chromium` "
                    "(as .ci/run does) and try again.")

APP = "[data-testid='stApp']"
IDLE = f"{APP}[data-test-script-state='notRunning']"
RUNNING = f"{APP}[data-test-script-state='running']"
CHART = "[data-testid='stPlotlyChart']"
DRAWN_CHART = f"{CHART} .js-plotly-plot .main-svg"
EXCEPTION = "[data-testid='stException']"
MAIN = "[data-testid='stMain']"
SIDEBAR = "[data-testid='stSidebar']"
TRANSLATION = f"{MAIN} h3"  # the first one is the "### EN translation" line above every view

# ----------------------------------------------------------------------------- server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `streamlit run app.py` (process, port, base URL, log file, checkpoint root)."""

    def __init__(self, proc: subprocess.Popen, port: int, log: Path, checkpoint_dir: Path, started: float):
        self.proc, self.port, self.log, self.checkpoint_dir, self.started = proc, port, log, checkpoint_dir, started
        self.url = f"http://127.0.0.1:{port}/"

    def link(self, **params) -> str:
        """The app's URL with query parameters (as a shared link would carry them)."""
        return self.url + ("?" + urlencode(params) if params else "")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return "(no log)"


def start_server(checkpoint_dir: str | Path, model: str, log: str | Path, port: int | None = None,
                 timeout: float = 60.0, extra_env: dict | None = None, script: str = "app.py") -> Server:
    """Start the app (or another `script`, relative to the repository root) with ATLAS_CHECKPOINT_DIR /
    ATLAS_DEFAULT_MODEL and wait until /_stcore/health says ok.

    free_port() only finds a port that was free a moment ago: if another process binds it before
    streamlit does, streamlit exits ("Port … is not available"); then try again on another free port.
    """
    for _ in range(3):
        server = _start_server(checkpoint_dir, model, log, port or free_port(), timeout, extra_env, script)
        if server.proc.poll() is None or port or "is not available" not in server.log_tail():
            break
    if server.proc.poll() is not None:
        raise RuntimeError(f"streamlit exited with code {server.proc.returncode} before it was healthy:\n"
                           f"{server.log_tail()}")
    return server


def _start_server(checkpoint_dir, model, log, port: int, timeout: float, extra_env: dict | None,
                  script: str = "app.py") -> Server:
    """One try of start_server: the healthy server, or one whose process has exited."""
    env = {**os.environ, "ATLAS_CHECKPOINT_DIR": str(checkpoint_dir), "ATLAS_DEFAULT_MODEL": model,
           "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]  # nobody edits the code during a test run; watching costs CPU
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no artifacts/ yet
    started = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Server(proc, port, log, Path(checkpoint_dir), started)
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        # Only once this process says it serves the port: before that, another server may answer there.
        if f"URL: {server.url.rstrip('/')}" in server.log_tail(100_000):
            try:
                with urllib.request.urlopen(f"{server.url}_stcore/health", timeout=2) as r:
                    if r.status == 200 and r.read().strip() == b"ok":
                        return server
            except (urllib.error.URLError, OSError):
                pass
        if time.monotonic() > deadline:
            stop_server(server)
            raise RuntimeError(f"streamlit was not healthy after {timeout:.0f} s:\n{server.log_tail()}")
        time.sleep(0.25)
    return server


def stop_server(server: Server) -> None:
    """Stop the server process we started (only that process, by its id)."""
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(timeout=10)


# ----------------------------------------------------------------------------- browser

def chromium_missing() -> str | None:
    """None when Debian's Chromium and the playwright package are there, else what to install."""
    if not Path(CHROMIUM).is_file():
        return MISSING_CHROMIUM
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "The playwright Python package is missing: `pip install -r requirements.txt`."
    return None


def launch_chromium(playwright, args: list[str] = CHROMIUM_ARGS):
    """Debian's Chromium, headless (never `playwright install`)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)


def new_page(browser, width: int = 1440, height: int = 1000, timeout: float = 30_000):
    """A page in a fresh context (so a fresh Streamlit session) that counts the app's script runs."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(timeout)
    context.add_init_script(RUN_COUNTER_JS)
    return context.new_page()


def wait_idle(page, timeout: float = 30_000) -> None:
    """The app is connected and no script run is in progress."""
    page.wait_for_selector(IDLE, timeout=timeout)


def runs(page) -> int:
    """How many script runs of this page have finished."""
    return page.evaluate("() => window.__atlasRuns")


def wait_new_run(page, before: int, timeout: float = 30_000) -> None:
    """Wait until a run after the first `before` ones has finished, and the page shows what it drew."""
    page.wait_for_function(SETTLED_JS, arg=[before, IDLE], timeout=timeout, polling="raf")


def wait_charts(page, timeout: float = 30_000, at_least: int = 1) -> int:
    """Wait until the page holds at least `at_least` Plotly charts and every one has drawn its SVG; returns how many
    there are. A page's charts mount one by one (Streamlit loads the chart's code lazily), so a page that should
    show several waits for all of them rather than returning when the first few are drawn."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(CHARTS_DRAWN_JS, arg=[CHART, at_least], timeout=timeout, polling="raf")
    except PlaywrightTimeout:
        alerts = page.locator("[data-testid='stAlert'], " + EXCEPTION).all_inner_texts()
        raise AssertionError(f"expected at least {at_least} drawn charts within {timeout / 1000:.0f} s; the page has "
                             f"{page.locator(CHART).count()} charts, {page.locator(DRAWN_CHART).count()} drawn; "
                             f"its alerts: {alerts}") from None
    return page.locator(CHART).count()


def wait_texts(page, selector: str, *parts: str, start: bool = False, timeout: float = 120_000) -> None:
    """Wait until, for each of `parts`, an element matching `selector` holds it in its text (begins with it, with
    `start`): a page's charts draw one by one, so the one that should show a text may come after the first."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function("""([sel, parts, start]) => {
            const texts = [...document.querySelectorAll(sel)].map(e => e.textContent.trim());
            return parts.every(p => texts.some(t => start ? t.startsWith(p) : t.includes(p)));
        }""", arg=[selector, list(parts), start], timeout=timeout, polling="raf")
    except PlaywrightTimeout:
        raise AssertionError(f"no {selector} held each of {parts} within {timeout / 1000:.0f} s; the page has "
                             f"{page.locator(selector).all_text_contents()[:20]}") from None


def open_app(page, url: str, timeout: float = 120_000) -> None:
    """Load the app and wait for its first script run to finish.

    A fresh server's first run imports torch and loads the model: 30 s on a busy 2-core machine.
    """
    page.goto(url, wait_until="domcontentloaded", timeout=timeout)
    wait_new_run(page, 0, timeout)


def full_screenshot(page, path: str | Path, max_height: int = 12_000) -> Path:
    """A screenshot of the whole page: Streamlit scrolls inside stMain, so grow the viewport to fit it."""
    size = page.viewport_size
    height = page.evaluate("""() => Math.max(...[...document.querySelectorAll(
        "[data-testid='stMain'], [data-testid='stSidebarContent']")].map(e => e.scrollHeight), window.innerHeight)""")
    try:
        if height > size["height"]:
            page.evaluate("() => { window.atlasHoldScreen = true; }")  # presenter mode: not a new screen to draw for
            page.set_viewport_size({"width": size["width"], "height": min(height, max_height)})
            # let Plotly re-lay out the charts to the new size
            page.wait_for_function(LAID_OUT_JS, arg=CHART, timeout=30_000, polling="raf")
            # tables draw on a canvas after the resize: wait until each has its size, then for two frames
            page.wait_for_function("""() => [...document.querySelectorAll("[data-testid='stDataFrame'] canvas")]
                .every(c => c.width > 0 && c.height > 0)""", timeout=30_000, polling="raf")
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(size)
        page.evaluate("() => new Promise(r => setTimeout(() => { window.atlasHoldScreen = false; r(); }, 400))")
    return Path(path)


def alert_texts(page, kind: str) -> list[str]:
    """Texts of the st.error / st.info / st.warning / st.success boxes ('Error', 'Info', ...)."""
    return page.locator(f"[data-testid='stAlertContent{kind}']").all_inner_texts()


def assert_clean(page, where: str) -> None:
    """No Streamlit exception box, no stack trace, no error box anywhere on the page."""
    boxes = page.locator(EXCEPTION)
    assert boxes.count() == 0, f"{where}: the app showed an exception:\n" + "\n---\n".join(boxes.all_inner_texts())
    assert "Traceback" not in page.locator("body").inner_text(), where
    assert alert_texts(page, "Error") == [], where


def chart_titles(page) -> list[str]:
    return [t.strip() for t in page.locator(f"{CHART} .main-svg .gtitle").all_text_contents()]


def widget(page, key: str):
    """The element container of the widget created with key=`key` (Streamlit gives it class st-key-KEY)."""
    return page.locator(f".st-key-{key}")


def choose_view(page, view: str, timeout: float = 30_000) -> None:
    """Click a view in the sidebar's "View" radio and wait for the new run to finish."""
    before = runs(page)
    widget(page, "view").locator("[data-testid='stRadioOption']").get_by_text(view, exact=True).click()
    wait_new_run(page, before, timeout)


def selected_view(page) -> str:
    return widget(page, "view").locator("[data-testid='stRadioOption'][data-selected='true']").inner_text().strip()


def enter_text(page, text: str, timeout: float = 30_000) -> None:
    """Replace the sidebar's German sentence and commit it with Ctrl+Enter; waits for the new run."""
    area = widget(page, "text").locator("textarea")
    before = runs(page)
    for _ in range(3):
        area.fill(text)
        area.press("Control+Enter")
        # Wait for the run to finish, or for the widget to re-render with the server's value (it shows
        # another text again): then the edit was swallowed and no run starts, so type it again.
        page.wait_for_function("""([n, sel, text]) => {
            const area = document.querySelector(sel);
            return window.__atlasRuns > n || (area !== null && area.value !== text);
        }""", arg=[before, ".st-key-text textarea", text], timeout=timeout, polling="raf")
        if runs(page) > before:
            wait_new_run(page, before, timeout)
            return
    raise AssertionError(f"the text area showed another text three times after {text!r} was typed")


def select_option(page, key: str, option: str, timeout: float = 30_000) -> None:
    """Pick `option` in the selectbox with key `key` and wait for the new run."""
    before = runs(page)
    widget(page, key).locator("input[role='combobox']").click()
    page.locator("[role='listbox'] [role='option']").get_by_text(option, exact=True).click()
    wait_new_run(page, before, timeout)


def selectbox_value(page, key: str) -> str:
    return widget(page, key).locator("input[role='combobox']").input_value()


# ----------------------------------------------------------------------------- fixtures

# Every test the session collected, by node id, with its marks before `-m` (conftest.py; tests/test_markers.py).
COLLECTED = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def atlas_checkpoints(tmp_path_factory) -> Path:
    """A checkpoint root holding one tiny trained model, `demo`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch

    from tiny_checkpoint import make_tiny_checkpoint

    root = tmp_path_factory.mktemp("atlas_checkpoints")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # ten times faster than 2 threads on a busy 2-core machine
    try:
        make_tiny_checkpoint(root / "demo")
        _write_head_report(root / "demo")
        _train_with_film(root / "filmed", tmp_path_factory.mktemp("film_corpus"))
    finally:
        torch.set_num_threads(threads)
    return root


def _train_with_film(out: Path, data: Path) -> None:
    """`filmed`: a 1-layer model trained 8 epochs on a 40-pair synthetic corpus by model.train, with its film."""
    import gzip

    from model.training import train as train_cli
    from test_model_data import synthetic_corpus, train_args

    pairs = synthetic_corpus()
    for split, items in (("train", pairs), ("val", pairs[1:40:10])):
        for lang, k in (("de", 0), ("en", 1)):
            with gzip.open(data / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(p[k] for p in items) + "\n")
    if train_cli.main(train_args(data, out, 8, "--max-tokens", "60", "--test-split", "", "--bleu-every", "100")):
        raise RuntimeError(f"training the filmed test model into {out} failed")


def _write_head_report(folder: Path) -> None:
    """The Heads page's report for the tiny model, over its own sentences (the untrained twin has none: the
    browser test computes that one from the page)."""
    from model.analysis.analyze import analyze
    from model.analysis.report import write_report
    from model.inference.translator import Translator
    from tiny_checkpoint import ENGLISH, GERMAN

    report = analyze(Translator.from_checkpoint(folder), GERMAN, ENGLISH, name=folder.name)
    write_report(report, None, folder)


def start_test_server(checkpoint_dir: Path, model: str, tmp_path_factory) -> Server:
    """A test's `streamlit run app.py`: one torch thread (tiny models gain nothing from more, and a second thread
    fights the browser for CPU) and a cache folder of its own (reports computed from the page, the twin's, must
    not land in the user's ~/.cache); `server.cache` is that folder."""
    log = tmp_path_factory.mktemp(f"{model}_server") / "streamlit.log"
    cache = tmp_path_factory.mktemp(f"{model}_cache")
    server = start_server(checkpoint_dir, model, log, extra_env={"OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(cache)})
    server.cache = cache
    return server


@pytest.fixture(scope="session")
def app_server(atlas_checkpoints, tmp_path_factory):
    """`streamlit run app.py` serving the tiny `demo` model; stopped at the end of the session."""
    server = start_test_server(atlas_checkpoints, "demo", tmp_path_factory)
    yield server
    stop_server(server)


@pytest.fixture(scope="session")
def chromium():
    """One headless Debian Chromium for the whole session. A missing Chromium fails, never skips."""
    missing = chromium_missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p, TEST_CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, app_server):
    """A fresh browser context and page (so a fresh Streamlit session) per test."""
    pg = new_page(chromium)
    yield pg
    pg.context.close()


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    folder = ROOT / "artifacts" / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder

