"""The server's side of a walk: each script run and each background preparation, from a timing hook's log.

    PYTHONPATH=benchmarks/timing_hook ATLAS_TIMING_LOG=/tmp/runs.log python benchmarks/bench_floor.py --walks 1
    python benchmarks/server_timeline.py /tmp/runs.log

Prints, per server process (a gap of more than --gap seconds between events starts a new one), every script run
and preparation: when it started (seconds after the process's first run) and how long it took, in ms. A page whose
first visit takes much longer in the browser than its run here spends the rest in the browser (bench_floor.py,
profile_first_visit.py).
"""
from __future__ import annotations

import argparse
import sys


def spans(lines: list[str]) -> list[tuple[float, float, str, str]]:
    """(start, end, thread, what) of every run and preparation in the log, in order of start."""
    open_, out = {}, []
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3:
            continue
        t, thread, event = float(parts[0]), parts[1], parts[2]
        kind, _, name = event.partition(" ")[2].partition(" ")  # "run start" / "prep start Masks"
        what = event.split(" ")[0] + (f" {name}" if name else "")
        if kind == "start":
            open_[(thread, what)] = t
        elif (thread, what) in open_:
            out.append((open_.pop((thread, what)), t, thread, what))
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--gap", type=float, default=3.0, help="seconds without events that separate two servers")
    args = ap.parse_args()
    with open(args.log, encoding="utf-8") as f:
        found = spans(f.readlines())
    if not found:
        print(f"{args.log}: no runs logged (was the server started with PYTHONPATH=benchmarks/timing_hook and "
              "ATLAS_TIMING_LOG?)")
        return 2
    t0 = last = None
    for start, end, _, what in found:
        if last is None or start - last > args.gap:
            t0 = start
            print("\nserver" if last is not None else "server")
        print(f"  {start - t0:8.3f} s  {(end - start) * 1000:7.0f} ms  {what}")
        last = max(last or end, end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
