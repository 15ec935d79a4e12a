"""views/plumbing/pandas_gate.py: a server's first run goes without pandas; nobody works with Plotly while it is
imported.

Each test runs in a fresh interpreter: the gate is process-wide, and this test process imported pandas long ago.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for pandas' import: slow, and recorded, so a test can tell what happened while it ran.
PRELUDE = """
import sys, threading, time
sys.path.insert(0, {root!r})
from views.plumbing import pandas_gate as g
events = []
def slow_import():
    events.append("import start")
    time.sleep(0.3)
    events.append("import end")
    g._ready.set()
g._import = slow_import
"""


def run(body: str) -> str:
    code = PRELUDE.format(root=str(ROOT)) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_first_run_goes_on_and_the_others_wait_until_pandas_is_whole():
    out = run("""
        def first():
            assert g.enter() is True
            events.append("first run")
            time.sleep(0.2)  # its page, without pandas
            events.append("first run ends")
            g.leave()
        def other(n):
            time.sleep(0.05)
            assert g.enter() is False
            events.append("other run")
        threads = [threading.Thread(target=first)] + [threading.Thread(target=other, args=(n,)) for n in range(3)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(events)
    """)
    events = eval(out)
    assert events[:4] == ["first run", "first run ends", "import start", "import end"]
    assert events[4:] == ["other run"] * 3  # none of them ran beside the first run or the import


def test_a_first_run_that_fails_still_lets_the_others_go():
    out = run("""
        def first():
            assert g.enter() is True
            raise SystemExit  # a run that ends without leave(): its thread is gone
        t = threading.Thread(target=first); t.start(); t.join()
        start = time.perf_counter()
        assert g.enter() is False
        print(events, round(time.perf_counter() - start, 1) < 5)
    """)
    assert out.strip() == "['import start', 'import end'] True"


def test_the_first_runs_thread_starting_another_run_ends_the_first():
    """Streamlit reruns in the same thread when a rerun is asked for during a run: that run is no first run."""
    out = run("""
        assert g.enter() is True
        g.wait()  # the first run's own thread never waits for itself while it runs
        events.append("first run")
        assert g.enter() is False  # a rerun in the same thread, without leave(): the import runs first
        print(events)
    """)
    assert eval(out) == ["first run", "import start", "import end"]


def test_a_thread_the_first_run_left_behind_waits():
    out = run("""
        assert g.enter() is True
        def callback():
            g.wait()
            events.append("callback")
        t = threading.Thread(target=callback); t.start()
        time.sleep(0.1)
        events.append("first run ends")
        g.leave()
        t.join()
        print(events)
    """)
    assert eval(out) == ["first run ends", "import start", "import end", "callback"]


def test_pandas_imported_already_means_no_first_run():
    out = run("""
        import pandas
        print(g.enter(), g.ready(), g._first is None)
    """)
    assert out.strip() == "False True True"


def test_the_servers_first_page_imports_no_pandas(tmp_path):
    """The Overview in a fresh interpreter: the first run imports no pandas and draws its tables as Markdown; the
    next run finds the import done."""
    from tests.tiny_checkpoint import GERMAN, make_tiny_checkpoint

    make_tiny_checkpoint(tmp_path / "demo")
    out = run(f"""
        import os
        os.environ["ATLAS_CHECKPOINT_DIR"] = {str(tmp_path)!r}
        os.environ["ATLAS_DEFAULT_MODEL"] = "demo"
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file({str(ROOT / "app.py")!r}, default_timeout=120)
        at.query_params["text"] = {GERMAN[3]!r}
        at.run()
        assert not at.exception, at.exception
        print(at.session_state["view"], "pandas" in sys.modules, sum("|---" in m.value for m in at.markdown),
              g.ready())
        at.run()  # the next run: the first has ended, the (stand-in) import has run
        assert not at.exception, at.exception
        print(g.ready(), events)
    """)
    first, second = out.strip().splitlines()[-2:]
    view, imported, tables, ready = first.split()
    assert (view, imported, ready) == ("Overview", "False", "False") and int(tables) >= 3, out
    assert second == "True ['import start', 'import end']", out

