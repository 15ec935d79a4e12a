"""A classroom on one server: N students on the Attention view, each typing a new sentence every few seconds.

    python benchmarks/bench_classroom.py [--sessions 10 20 30] [--seconds 120] [--every 5] [--processes 1|2]

The app (one process, or --processes behind deploy/serve.py's nginx), each process warmed up by one session; per N,
N light sessions (classroom_client.py, no browser) for --seconds on `view=Attention&text=<its own sentence>`, typing
a new one --every s (± --jitter): latency = rerun sent -> script_finished; every run must show the session's own
sentence (wrong; foreign: another's); each side's CPU. Writes results/classroom.json (classroom_<P>proc.json).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import common
from classroom_client import Session, shows_sentence, squash
from common import add_server_args, cpu_seconds, distinct_sentences, serving, shown_path, summary, table, write_results

# ----------------------------------------------------------------------------- one classroom

class Classroom:
    """N sessions of one phase, their sentences and what they saw."""

    def __init__(self, url: str, n: int, seconds: float, every: float, jitter: float, sentences, timeout: float):
        self.url, self.n, self.seconds, self.every, self.jitter, self.timeout = url, n, seconds, every, jitter, timeout
        self.sentences = sentences  # a shared iterator: every sentence is typed once, by one session
        self.owner: dict[str, int] = {}  # squashed sentence -> the session that typed it
        self.opens, self.latencies, self.errors, self.wrong = [], [], [], []  # seconds, seconds, messages, messages
        self.actions, self.foreign, self.backends, self.deadline = 0, 0, {}, 0.0

    def _next(self, i: int) -> str:
        text = next(self.sentences)
        self.owner[squash(text)] = i
        return text

    def _check(self, i: int, run, text: str) -> None:
        if run.exceptions:
            self.errors.append(f"session {i}: the app raised {run.exceptions[0]}")
        if not shows_sentence(run, text):
            self.wrong.append(f"session {i} typed {text!r}, its DE line shows {run.de_line!r}")
            other = self.owner.get(squash(run.de_line or ""))
            if other is not None and other != i:
                self.foreign += 1

    async def student(self, i: int, rng: random.Random) -> None:
        await asyncio.sleep(rng.uniform(0, self.every))  # the class opens the page within a few seconds
        s, text = None, self._next(i)
        try:
            while time.perf_counter() < self.deadline:
                if s is None:  # (re)open: a browser tab loading the app's link
                    s = Session(self.url, timeout=self.timeout)
                    run = await s.open({"view": "Attention", "text": text})
                    self.opens.append(run.seconds)
                    self.backends[s.backend or "direct"] = self.backends.get(s.backend or "direct", 0) + 1
                    self._check(i, run, text)
                pause = self.every * rng.uniform(1 - self.jitter, 1 + self.jitter)
                if time.perf_counter() + pause >= self.deadline:
                    break
                await asyncio.sleep(pause)
                text = self._next(i)
                try:
                    run = await s.type_text(text)
                except Exception as e:  # a timeout, a closed websocket: count it, open again
                    self.errors.append(f"session {i}: {type(e).__name__}: {e}")
                    await _close(s)
                    s = None
                    continue
                self.actions += 1
                self.latencies.append(run.seconds)
                self._check(i, run, text)
        except Exception as e:  # the opening failed
            self.errors.append(f"session {i} (opening): {type(e).__name__}: {e}")
        finally:
            if s is not None:
                await _close(s)

    async def run(self) -> None:
        self.deadline = time.perf_counter() + self.seconds
        await asyncio.gather(*(self.student(i, random.Random(1000 * self.n + i)) for i in range(self.n)))


async def _close(s: Session) -> None:
    with contextlib.suppress(Exception):  # closing a broken session
        await s.close()


async def warm_up(url: str, names: list[str | None], sentences, timeout: float) -> list[float]:
    """One session per process opens the Attention view (the model loads, torch warms up), then types once."""
    times = []
    for name in names:
        s = Session(url, cookies={"atlas_backend": name} if name else None, timeout=timeout)
        run = await s.open({"view": "Attention", "text": next(sentences)})
        times.append(run.seconds)
        await s.type_text(next(sentences))
        if name and s.backend != name:
            raise RuntimeError(f"the warm-up session for {name} reached {s.backend}")
        await s.close()
    return times


def phase(url: str, n: int, args, sentences, pids: dict[str, int]) -> dict:
    room = Classroom(url, n, args.seconds, args.every, args.jitter, sentences, args.timeout)
    cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
    own0, t0 = common.own_cpu_seconds(), time.perf_counter()
    asyncio.run(room.run())
    wall = time.perf_counter() - t0
    own = common.own_cpu_seconds() - own0
    server_cpu = {k: round(cpu_seconds(p) - cpu0[k], 2) for k, p in pids.items()}
    lat = room.latencies
    return {
        "sessions": n, "wall_s": round(wall, 1), "opened": len(room.opens), "actions": room.actions,
        "actions_per_s": round(room.actions / wall, 2), "errors": len(room.errors), "wrong": len(room.wrong),
        "foreign": room.foreign,
        "latency": {**summary(lat), "mean_ms": statistics.fmean(lat) * 1000} if lat else None,
        "open": summary(room.opens) if room.opens else None,
        "sessions_per_backend": dict(sorted(room.backends.items())),
        "load_generator_cpu_s": round(own, 2), "load_generator_cpu_share": round(own / wall, 3),
        "server_cpu_s": server_cpu, "server_cpu_share": round(sum(server_cpu.values()) / wall, 3),
        "error_messages": room.errors[:20], "wrong_messages": room.wrong[:20],
        "latencies_s": [round(x, 4) for x in lat], "open_s": [round(x, 4) for x in room.opens],
    }


def print_phases(phases: list[dict], args) -> None:
    """One row per class size: actions, errors, latency, each side's CPU."""
    rows = []
    for ph in phases:
        lat = ph["latency"] or {"median_ms": float("nan"), "p95_ms": float("nan"), "max_ms": float("nan")}
        rows.append([ph["sessions"], ph["actions"], ph["errors"], ph["wrong"], lat["median_ms"], lat["p95_ms"],
                     lat["max_ms"], ph["open"]["median_ms"] if ph["open"] else float("nan"),
                     f"{ph['load_generator_cpu_share'] * 100:.1f}%", f"{ph['server_cpu_share'] * 100:.0f}%",
                     " ".join(f"{k.replace('streamlit_', 's')}={v:.0f}" for k, v in ph["server_cpu_s"].items())])
    print(f"\n{args.processes} process(es), {os.cpu_count()} CPUs, {args.seconds:.0f} s per class size, a new sentence "
          f"every {args.every:g} s (±{args.jitter * 100:.0f}%) per session")
    print(table(rows, ["sessions", "actions", "errors", "wrong", "p50 ms", "p95 ms", "max ms", "open p50 ms",
                       "client CPU", "server CPU", "server CPU s"]))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--sessions", type=int, nargs="+", default=[10, 20, 30], help="class sizes, one phase each")
    ap.add_argument("--seconds", type=float, default=120, help="length of each phase")
    ap.add_argument("--every", type=float, default=5, help="seconds between a result and the next sentence")
    ap.add_argument("--jitter", type=float, default=0.5, help="the pause is every × uniform(1-jitter, 1+jitter)")
    ap.add_argument("--processes", type=int, default=1,
                    help="1: one Streamlit process, direct; more: that many behind nginx (deploy/serve.py)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds one run may take before it is an error")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    if (ready := common.server_preflight(args, browser=False, nginx=args.processes > 1)) is None:
        return 2
    ckpt_dir = ready[1]
    threads = args.torch_threads or 1
    env = {"ATLAS_TORCH_THREADS": str(threads), "OMP_NUM_THREADS": "1"}
    per_phase = [int(n * (args.seconds / (args.every * (1 - args.jitter)) + 3)) for n in args.sessions]
    sentences = iter(distinct_sentences(min(18_432, sum(per_phase) + 4 * args.processes + 8)))
    with tempfile.TemporaryDirectory(prefix="bench_classroom_") as tmp, \
            serving(args.processes, ckpt_dir, args.model, Path(tmp), env) as served:
        print(f"{args.processes} process(es) at {served.url}; warming up …", flush=True)
        warm = asyncio.run(warm_up(served.url, served.names, sentences, args.timeout))
        print("first run per process: " + ", ".join(f"{w:.1f} s" for w in warm), flush=True)
        phases = []
        for n in args.sessions:
            print(f"\n{n} sessions for {args.seconds:.0f} s …", flush=True)
            phases.append(ph := phase(served.url, n, args, sentences, served.pids))  # the table comes at the end
            print(f"  {ph['actions']} new sentences, {ph['errors']} errors, {ph['wrong']} wrong", flush=True)
            for m in ph["error_messages"][:3] + ph["wrong_messages"][:3]:
                print("   ", m, flush=True)
        dead = served.dead()

    print_phases(phases, args)
    if dead:
        print("\nWARNING: " + "; ".join(dead))
    name = "classroom" if args.processes == 1 else f"classroom_{args.processes}proc"
    write_results(name, {
        "benchmark": "classroom", "processes": args.processes, "checkpoint_dir": shown_path(ckpt_dir),
        "model": args.model,
        "torch_threads": threads, "seconds": args.seconds, "every_s": args.every, "jitter": args.jitter,
        "proxy": "nginx, cookie-sticky (deploy/nginx.conf.template)" if args.processes > 1 else None,
        "client": "benchmarks/classroom_client.py (Streamlit websocket protocol, no browser)",
        "warm_up_first_run_s": warm, "phases": phases, "processes_died": dead})
    return 1 if any(ph["wrong"] or ph["errors"] for ph in phases) or dead else 0


if __name__ == "__main__":
    sys.exit(main())
