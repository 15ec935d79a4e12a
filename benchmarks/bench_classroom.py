"""A classroom on one server: students on the Attention view typing sentences, or voting in the quiz's live poll.

    python benchmarks/bench_classroom.py [--sessions 10 20 30] [--seconds 120] [--every 5] [--processes 1|2]
    python benchmarks/bench_classroom.py --poll [--students 60] [--within 10] [--rounds 5] [--processes 1|2] [--fault]

The app (one process, or --processes behind deploy/serve.py's nginx); students are light sessions
(tests/classroom_client.py, no browser). Sentences: each process warmed up by one session; per N, N sessions for
--seconds on `view=Attention&text=<its own sentence>`, typing a new one --every s (± --jitter): latency = rerun sent
-> script_finished; every run must show the session's own sentence (wrong; foreign: another's); each side's CPU.
Writes results/classroom.json (classroom_<P>proc.json). --poll: one room store (SQLite in a temporary
ATLAS_ROOM_DIR); the presenter is a Chromium page at 1280×720 in presenter mode on the quiz that clicks "Let the room
vote"; the students open `?room=CODE`. Each round is one question (Shuffle asks the next): every student answers
once within --within s; an answer's delay runs from its sending to the presenter's "N answered" line first counting
that many (its own clock; an upper bound). --fault: mid-way through the last round the process serving the most
students is killed; they reconnect through nginx and answer again, and the answers before must still count. Writes
results/poll.json (poll_<P>proc.json, poll_fault.json).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import common
from classroom_client import Session, shows_sentence, squash
from common import add_server_args, cpu_seconds, distinct_sentences, serving, shown_path, summary, table, write_results

# The presenter's page notes each change of its counts line (wall-clock ms), polled every 20 ms.
WATCH_JS = """() => { window.__poll = []; let last = '';
  setInterval(() => { const m = document.body.innerText.match(/(\\d+)\\s+in the room\\s+·\\s+(\\d+)\\s+answered/);
    const v = m ? m[2] : '';
    if (v !== last) { last = v; window.__poll.push([Date.now(), m ? +m[2] : -1]); } }, 20); }"""
POLL_SENTENCE = "Ein Mann mit einem orangefarbenen Hut starrt auf etwas ."

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


# ----------------------------------------------------------------------------- the live poll (--poll)

async def open_presenter(browser, url: str, timeout: float):
    page = await browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(timeout * 1000)
    query = f"present=1&view=Decoding&quiz=next&focus=quiz&dec_step=2&text={POLL_SENTENCE.replace(' ', '+')}"
    await page.goto(f"{url}?{query}")
    await page.get_by_role("button", name="Let the room vote").click()
    await page.get_by_text("Join:").wait_for()
    code = re.search(r"Join:\s*([0-9A-Z]{3})\s*([0-9A-Z]{3})", await page.inner_text("body"))
    await page.evaluate(WATCH_JS)
    return page, code.group(1) + code.group(2)


class Phone:
    """A student's phone in the room: it answers each question once."""

    def __init__(self, i: int, url: str, code: str, timeout: float):
        self.i, self.url, self.code, self.timeout = i, url, code, timeout
        self.s: Session | None = None
        self.sent: list[tuple[int, float]] = []  # (round, wall-clock seconds an answer was sent)
        self.errors: list[str] = []

    async def open(self) -> None:
        self.s = Session(self.url, timeout=self.timeout)
        await self.s.open({"room": self.code})

    async def answer(self, rnd: int, at: float, rng: random.Random) -> None:
        await asyncio.sleep(max(0.0, at - time.time()))
        try:
            await self.s.rerun()  # what the phone's own refresh does: the current question's buttons
            keys = sorted(k for k, wid in self.s.buttons.items() if k.startswith("room_opt_")
                          and wid in self.s._run_widgets)
            if not keys:
                raise RuntimeError("no question on the phone")
            self.sent.append((rnd, time.time()))
            run = await self.s.click(rng.choice(keys))
            if run.exceptions:
                self.errors.append(f"student {self.i}: {run.exceptions[0]}")
        except Exception as e:  # a closed websocket (the fault): reconnect through the proxy, answer again
            self.errors.append(f"student {self.i}: {type(e).__name__}: {e}")
            with contextlib.suppress(Exception):
                await self.s.reconnect(reload_page=True, resume=False)
                await self.answer(rnd, time.time(), rng)


async def one_round(page, phones: list[Phone], rnd: int, args, fault=None) -> dict:
    if rnd:
        await page.get_by_role("button", name="Shuffle").click()  # the next question: votes start from 0
        await page.wait_for_function("() => /\\b0\\s+answered/.test(document.body.innerText)")
    start, rng, n = time.time(), random.Random(rnd), len(phones)
    tasks = [ph.answer(rnd, start + rng.uniform(0, args.within), random.Random(1000 * rnd + ph.i)) for ph in phones]
    killed = await asyncio.gather(*tasks, *([fault(start + args.within / 2)] if fault else []))
    deadline = time.time() + 30
    while time.time() < deadline:
        seen = [(t / 1000, c) for t, c in await page.evaluate("() => window.__poll") if t >= start * 1000]
        if seen and seen[-1][1] >= n:
            break
        await asyncio.sleep(0.05)
    sent = sorted(t for ph in phones for r, t in ph.sent if r == rnd)[-n:]  # a re-sent answer replaces the first
    delays = [None if (shown := next((ts for ts, c in seen if c >= k), None)) is None else max(0.0, shown - t)
              for k, t in enumerate(sent, start=1)]
    return {"round": rnd, "answers_counted": seen[-1][1] if seen else 0, "students": n, "sent": len(sent),
            "last_answer_delay_s": delays[-1] if delays else None, "delays_s": delays,
            "killed_at_s": (killed[-1][0] - start) if fault else None}


async def poll_class(url: str, args, deployment=None) -> dict:
    from playwright.async_api import async_playwright

    import browser_support as bs

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=bs.CHROMIUM, args=bs.CHROMIUM_ARGS, headless=True)
        try:
            page, code = await open_presenter(browser, url, args.timeout)
            phones = [Phone(i, url, code, args.timeout) for i in range(args.students)]
            await asyncio.gather(*(ph.open() for ph in phones))
            rounds = []
            for rnd in range(args.rounds):
                fault = partial(common.kill_busiest, deployment, lambda: [ph.s.backend for ph in phones]) if (
                    args.fault and deployment is not None and rnd == args.rounds - 1) else None
                rounds.append(await one_round(page, phones, rnd, args, fault))
            for ph in phones:
                await _close(ph.s)
            return {"code_len": len(code), "rounds": rounds, "errors": [e for ph in phones for e in ph.errors]}
        finally:
            await browser.close()


def poll_main(args, ckpt_dir: Path, env: dict) -> int:
    with tempfile.TemporaryDirectory(prefix="bench_poll_") as tmp:
        os.environ["ATLAS_ROOM_DIR"] = str(Path(tmp) / "rooms")  # every process's store: one SQLite file
        with serving(args.processes, ckpt_dir, args.model, Path(tmp),
                     env | {"ATLAS_ROOM_DIR": os.environ["ATLAS_ROOM_DIR"]}) as served:
            result = asyncio.run(poll_class(served.url, args, served.deployment))
    delays = [d for r in result["rounds"] for d in r["delays_s"] if d is not None]
    lost = sum(r["students"] - r["answers_counted"] for r in result["rounds"])
    rows = [[r["round"] + 1, r["answers_counted"], r["students"], r["last_answer_delay_s"] or float("nan"),
             max((d for d in r["delays_s"] if d is not None), default=float("nan"))] for r in result["rounds"]]
    print(table(rows, ["round", "counted", "students", "last answer shown after s", "max delay s"]))
    s = summary(delays) if delays else None
    if s:
        print(f"answer -> projector: p50 {s['median_ms']:.0f} ms, p95 {s['p95_ms']:.0f} ms, max {s['max_ms']:.0f} ms;"
              f" {lost} answers not counted; {len(result['errors'])} student errors")
    name = "poll_fault" if args.fault else ("poll" if args.processes == 1 else f"poll_{args.processes}proc")
    write_results(name, {"benchmark": "poll", "processes": args.processes, "students": args.students,
                         "within_s": args.within, "store": "SQLite (ATLAS_ROOM_DIR, WAL)",
                         "presenter": "Chromium 1280x720, presenter mode",
                         "students_client": "tests/classroom_client.py", "delay": s, "answers_not_counted": lost,
                         **result})
    return 1 if lost or not s or s["p95_ms"] > 1000 else 0


# ----------------------------------------------------------------------------- main

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--processes", type=int, default=1,
                    help="1: one Streamlit process, direct; more: that many behind nginx (deploy/serve.py)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds one run may take before it is an error")
    ap.add_argument("--sessions", type=int, nargs="+", default=[10, 20, 30], help="class sizes, one phase each")
    ap.add_argument("--seconds", type=float, default=120, help="length of each phase")
    ap.add_argument("--every", type=float, default=5, help="seconds between a result and the next sentence")
    ap.add_argument("--jitter", type=float, default=0.5, help="the pause is every × uniform(1-jitter, 1+jitter)")
    ap.add_argument("--poll", action="store_true", help="the live poll instead: a presenter and voting phones")
    ap.add_argument("--students", type=int, default=60, help="--poll: phones in the room")
    ap.add_argument("--within", type=float, default=10, help="--poll: every student answers within this many seconds")
    ap.add_argument("--rounds", type=int, default=5, help="--poll: questions, one after another")
    ap.add_argument("--fault", action="store_true", help="--poll: kill the busiest process in the last round")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    if (ready := common.server_preflight(args, browser=args.poll, nginx=args.processes > 1)) is None:
        return 2
    ckpt_dir = ready[1]
    threads = args.torch_threads or 1
    env = {"ATLAS_TORCH_THREADS": str(threads), "OMP_NUM_THREADS": "1"}
    if args.poll:
        return poll_main(args, ckpt_dir, env)
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
        "client": "tests/classroom_client.py (Streamlit websocket protocol, no browser)",
        "warm_up_first_run_s": warm, "phases": phases, "processes_died": dead})
    return 1 if any(ph["wrong"] or ph["errors"] for ph in phases) or dead else 0


if __name__ == "__main__":
    sys.exit(main())
