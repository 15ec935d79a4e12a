"""A room votes on the quiz: N students answer from their phones while the projector draws their answers.

    python benchmarks/bench_poll.py [--students 60] [--within 10] [--rounds 5] [--processes 1|2] [--fault]

The app (one process, or --processes behind deploy/serve.py's nginx, one shared room store in a temporary
ATLAS_ROOM_DIR); the presenter is a real Chromium page at 1280×720 in presenter mode on the quiz, which clicks "Let
the room vote"; the students are light sessions (classroom_client.py, no browser) that open `?room=CODE`. Each round
is one question (Shuffle asks the next): every student answers once at a random moment within --within s. The
presenter's page records, in its own clock, each change of its "N answered" line; an answer's delay is from the
moment its student sent it to the moment the projector first counted that many (an upper bound: the answer was
stored after it was sent). --fault: in the middle of a round the process serving the most students is killed; its
students reconnect through nginx to the other one and answer again, the answers before the kill must still count.
Writes results/poll.json (poll_<P>proc.json, poll_fault.json).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import common
from classroom_client import Session
from common import add_server_args, serving, summary, table, write_results

ANSWERED = re.compile(r"(\d+)\s+in the room\s+·\s+(\d+)\s+answered")
# The presenter's page notes each change of its counts line (wall-clock ms), polled every 20 ms.
WATCH_JS = """() => { window.__poll = []; let last = '';
  setInterval(() => { const m = document.body.innerText.match(/(\\d+)\\s+in the room\\s+·\\s+(\\d+)\\s+answered/);
    const v = m ? m[2] : '';
    if (v !== last) { last = v; window.__poll.push([Date.now(), m ? +m[2] : -1]); } }, 20); }"""
SENTENCE = "Ein Mann mit einem orangefarbenen Hut starrt auf etwas ."


async def open_presenter(browser, url: str, timeout: float):
    page = await browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(timeout * 1000)
    query = f"present=1&view=Decoding&quiz=next&focus=quiz&dec_step=2&text={SENTENCE.replace(' ', '+')}"
    await page.goto(f"{url}?{query}")
    await page.get_by_role("button", name="Let the room vote").click()
    await page.get_by_text("Join:").wait_for()
    code = re.search(r"Join:\s*([0-9A-Z]{3})\s*([0-9A-Z]{3})", await page.inner_text("body"))
    await page.evaluate(WATCH_JS)
    return page, code.group(1) + code.group(2)


class Student:
    def __init__(self, i: int, url: str, code: str, timeout: float):
        self.i, self.url, self.code, self.timeout = i, url, code, timeout
        self.s: Session | None = None
        self.sent: list[tuple[int, float]] = []  # (round, wall-clock seconds an answer was sent)
        self.errors: list[str] = []

    async def open(self) -> None:
        self.s = Session(self.url, timeout=self.timeout)
        await self.s.open({"room": self.code})

    def options(self) -> list[str]:
        return sorted(k for k in self.s.buttons if k.startswith("room_opt_"))

    async def answer(self, rnd: int, at: float, rng: random.Random) -> None:
        await asyncio.sleep(max(0.0, at - time.time()))
        try:
            await self.s.rerun()  # what the phone's own refresh does: the current question's buttons
            keys = [k for k in self.options() if self.s.buttons[k] in self.s._run_widgets]
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


async def counted(page, since_ms: float) -> list[tuple[float, int]]:
    return [(t / 1000, n) for t, n in await page.evaluate("() => window.__poll") if t >= since_ms]


async def one_round(page, students: list[Student], rnd: int, args, fault=None) -> dict:
    if rnd:
        await page.get_by_role("button", name="Shuffle").click()  # the next question: votes start from 0
        await page.wait_for_function("() => /\\b0\\s+answered/.test(document.body.innerText)")
    start = time.time()
    rng = random.Random(rnd)
    tasks = [st.answer(rnd, start + rng.uniform(0, args.within), random.Random(1000 * rnd + st.i)) for st in students]
    killed = await asyncio.gather(*tasks, *([fault(start + args.within / 2)] if fault else []))
    n = len(students)
    deadline = time.time() + 30
    while time.time() < deadline:
        seen = await counted(page, start * 1000)
        if seen and seen[-1][1] >= n:
            break
        await asyncio.sleep(0.05)
    sent = sorted(t for st in students for r, t in st.sent if r == rnd)[-n:]  # a re-sent answer replaces the first
    delays = []
    for k, t in enumerate(sent, start=1):
        shown = next((ts for ts, c in seen if c >= k), None)
        delays.append(None if shown is None else max(0.0, shown - t))
    final = seen[-1][1] if seen else 0
    return {"round": rnd, "answers_counted": final, "students": n, "sent": len(sent),
            "last_answer_delay_s": delays[-1] if delays else None, "delays_s": delays,
            "killed_at_s": (killed[-1] - start) if fault else None}


async def classroom(url: str, args, deployment=None) -> dict:
    from playwright.async_api import async_playwright

    import browser_support as bs

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=bs.CHROMIUM, args=bs.CHROMIUM_ARGS, headless=True)
        try:
            page, code = await open_presenter(browser, url, args.timeout)
            students = [Student(i, url, code, args.timeout) for i in range(args.students)]
            await asyncio.gather(*(st.open() for st in students))
            rounds, fault = [], None
            for rnd in range(args.rounds):
                if args.fault and deployment is not None and rnd == args.rounds - 1:
                    fault = _killer(deployment, students)
                rounds.append(await one_round(page, students, rnd, args, fault))
            for st in students:
                with contextlib.suppress(Exception):
                    await st.s.close()
            return {"code_len": len(code), "rounds": rounds, "errors": [e for st in students for e in st.errors]}
        finally:
            await browser.close()


def _killer(deployment, students):
    async def kill(at: float) -> float:
        await asyncio.sleep(max(0.0, at - time.time()))
        tally = {b.name: sum(st.s.backend == b.name for st in students) for b in deployment.backends}
        victim = max(deployment.backends, key=lambda b: tally[b.name])
        t = time.time()
        victim.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(victim.proc.wait, 60)
        return t
    return kill


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument("--within", type=float, default=10, help="every student answers within this many seconds")
    ap.add_argument("--rounds", type=int, default=5, help="questions, one after another")
    ap.add_argument("--processes", type=int, default=1, help="1: one process, direct; 2: behind nginx")
    ap.add_argument("--fault", action="store_true", help="kill the busiest process in the last round (2 processes)")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    if (ready := common.server_preflight(args, browser=True, nginx=args.processes > 1)) is None:
        return 2
    with tempfile.TemporaryDirectory(prefix="bench_poll_") as tmp:
        os.environ["ATLAS_ROOM_DIR"] = str(Path(tmp) / "rooms")  # every process's store: one SQLite file
        env = {"ATLAS_TORCH_THREADS": str(args.torch_threads or 1), "OMP_NUM_THREADS": "1",
               "ATLAS_ROOM_DIR": os.environ["ATLAS_ROOM_DIR"]}
        with serving(args.processes, ready[1], args.model, Path(tmp), env) as served:
            result = asyncio.run(classroom(served.url, args, served.deployment))
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
                         "presenter": "Chromium 1280x720, presenter mode", "students_client": "classroom_client.py",
                         "delay": s, "answers_not_counted": lost, **result})
    return 1 if lost or not s or s["p95_ms"] > 1000 else 0


if __name__ == "__main__":
    sys.exit(main())
