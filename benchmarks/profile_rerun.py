"""Where does a rerun's time go? cProfile of the script thread, per view, without a browser.

    python benchmarks/profile_rerun.py [--views Overview Attention ...] [--runs 5] [--top 15]
                                       [--new-sentence | --first-visit]

Runs app.py in Streamlit's AppTest (the same script run the server does, minus the websocket), warms the
caches with two runs, then profiles `--runs` reruns of each view (or, with --new-sentence, runs that each type
a different sentence) and prints the wall time per run and the functions with the most cumulative time.
The server adds sending the result and, unless `runner.postScriptGC` is off, a full garbage collection per run.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

from common import ROOT, distinct_sentences
from model import records

VIEWS = [v for v in records.VIEWS if v not in ("Heads", "Training")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--views", nargs="*", default=VIEWS)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=15, help="functions listed per view (0: none)")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--new-sentence", action="store_true", help="each profiled run types another sentence")
    how.add_argument("--first-visit", action="store_true",
                     help="each profiled run switches to the view after another sentence was typed on Attention")
    args = ap.parse_args()

    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.testing.v1 import AppTest

    active = {"on": False, "profiler": cProfile.Profile()}
    run_script = script_runner.ScriptRunner._run_script

    def profiled(self, *a, **k):  # the script runs in its own thread: profile it there
        if active["on"]:
            active["profiler"].enable()
        try:
            return run_script(self, *a, **k)
        finally:
            if active["on"]:
                active["profiler"].disable()

    script_runner.ScriptRunner._run_script = profiled
    sentences = distinct_sentences(args.runs + 1)
    print(f"{'view':22} {'ms per run':>10}")
    for view in args.views:
        active["profiler"] = cProfile.Profile()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params["view"] = view
        at.run()
        at.run()
        seconds = 0.0
        for i in range(args.runs):
            if args.first_visit:
                at.sidebar.radio(key="view").set_value("Attention").run()
                at.sidebar.text_area(key="text").set_value(sentences[i]).run()
                at.sidebar.radio(key="view").set_value(view)
            elif args.new_sentence:
                at.sidebar.text_area(key="text").set_value(sentences[i])
            active["on"] = True
            start = time.perf_counter()
            at.run()
            seconds += time.perf_counter() - start
            active["on"] = False
        ms = seconds * 1000 / args.runs
        print(f"{view:22} {ms:10.0f}")
        if args.top:
            out = io.StringIO()
            pstats.Stats(active["profiler"], stream=out).sort_stats("cumulative").print_stats(args.top)
            print(out.getvalue().split("\n", 6)[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
