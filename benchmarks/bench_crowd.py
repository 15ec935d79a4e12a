"""A class opening the link at once, and a backend lost mid-class: real Chromium pages on fresh servers.

    python benchmarks/bench_crowd.py [--pages 8 16 32] [--processes 1 2] [--rounds 1] [--timeout 180]
        [--fault | --fault-only] [--fault-pages 8] [--fault-signal TERM KILL]

Crowd: per process count (1: direct; 2+: behind deploy/serve.py's nginx), N and round, N Chromium pages opened at
once on fresh servers: pages that got the app, seconds to the first drawn page, exceptions, pages per process.
--fault: students on 2 processes typing a sentence every --every s; after --fault-after s the busiest process gets
--fault-signal (TERM: a stop; KILL: a crash) and the class goes on: what its students saw, reconnect, the state the
other process served, whether a sentence was lost; the others: anything noticed. docs/load.md; results/crowd.json.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import common
from classroom_client import squash
from common import ROOT, add_server_args, distinct_sentences, serving, shown_path, table, write_results

assert str(ROOT / "tests") in sys.path, "common puts tests/ on the path, for the two imports below"
import browser_support as bs  # noqa: E402
from crowd_support import PAGE_DONE_JS, open_at_once  # noqa: E402

DE_LINE = f"{bs.MAIN} h4"  # the first one is the "#### DE <tokens>" line above every view
VIEW = ".st-key-view [data-testid='stRadioOption'][data-selected='true']"
ENV = {"ATLAS_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}  # what deploy/serve.py gives each process
# Installed after browser_js.RUN_COUNTER_JS (it wraps that WebSocket class): a log with Date.now() stamps.
LOG_JS = """
window.__crowdLog = [];
(() => {
  const log = (ev, detail) => window.__crowdLog.push({t: Date.now(), ev, detail: detail || ''});
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket { constructor(...args) { super(...args);
    this.addEventListener('open', () => log('ws-open'));
    this.addEventListener('close', e => log('ws-close', 'code ' + e.code)); } };
  const text = sel => [...document.querySelectorAll(sel)].map(e => e.innerText.trim().split('\\n')[0]).join(' | ');
  let last = {}, runs = 0, pending = 0;
  setInterval(() => {
    const now = {status: text("[data-testid='stConnectionStatus']"), dialog: text("[role='dialog']"),
                 exception: text("%(exc)s"), error: text("[data-testid='stAlertContentError']")};
    for (const k in now) if (now[k] !== (last[k] || '')) log(k, now[k]);
    last = now;
    if ((window.__atlasRuns || 0) > runs) { runs = window.__atlasRuns; pending = Date.now(); }
    else if (pending && document.querySelector("%(idle)s")) {  // one tick later, so React has drawn the run
      const de = document.querySelector("%(de)s");
      log('drawn', JSON.stringify({de: de ? de.innerText : '', view: text("%(view)s"), exception: now.exception,
                                   ran: pending}));
      pending = 0;
    }
  }, 100);
})();
""" % {"exc": bs.EXCEPTION, "idle": bs.IDLE, "de": DE_LINE, "view": VIEW}  # noqa: UP031 - JavaScript braces


def link(url: str, text: str) -> str:
    """The app's link for a sentence on the Attention view, as a teacher shares it."""
    return url + "?" + urlencode({"view": "Attention", "text": text})


def spread(xs: list[float]) -> dict:
    """p50 / p95 / max of seconds (None for an empty list)."""
    s = common.summary(xs) if xs else {}
    return {"n": len(xs)} | {f"{k}_s": round(s[f"{m}_ms"] / 1000, 2) if xs else None
                             for k, m in (("p50", "median"), ("p95", "p95"), ("max", "max"))}


def first_visits_per_backend(deployment) -> dict:
    """From nginx's access log: the page requests without a cookie (fresh visitors), per process that answered."""
    counts: dict[str, int] = {}
    for line in (deployment.workdir / "access.log").read_text(encoding="utf-8", errors="replace").splitlines():
        if '"GET /?' in line and line.rsplit("cookie=", 1)[-1] in ("", "-"):
            name = line.split("backend=")[-1].split()[0] if "backend=" in line else "?"
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def crowd_phase(processes: int, pages: int, rnd: int, args, ckpt: Path, sentence: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_crowd_") as tmp, \
            serving(processes, ckpt, args.model, Path(tmp), ENV) as served:
        results = open_at_once([link(served.url, sentence)] * pages, timeout=args.timeout)
        per_backend = first_visits_per_backend(served.deployment) if served.deployment else {"direct": pages}
        dead, start_s = served.dead(), served.start_s
    got = [r for r in results if r.got_app]
    errors = [f"exception: {r.exceptions[0]}" if r.exceptions else (r.error or "no header drawn")
              for r in results if not r.got_app]
    return {"processes": processes, "pages": pages, "round": rnd, "server_start_s": round(start_s, 1),
            "got_app": len(got), "with_exception": sum(bool(r.exceptions) for r in results),
            "timed_out": sum("Timeout" in r.error for r in results), "first_drawn": spread([r.seconds for r in got]),
            "seconds": [None if r.seconds is None else round(r.seconds, 2) for r in results],
            "errors": errors, "first_visits_per_backend": per_backend, "processes_died": dead}


# ----------------------------------------------------------------------------- fault: a class, one process lost

class Student:
    def __init__(self, i: int, page, sentence: str):
        self.i, self.page, self.first, self.backend, self.backend_after = i, page, sentence, "", ""
        self.actions: list[dict] = []  # t (wall clock), s (seconds or None), text, tries, error, shows, de, area
        self.log: list[dict] = []  # LOG_JS's events


async def cookie(page) -> str:
    return next((c["value"] for c in await page.context.cookies() if c["name"] == "atlas_backend"), "")


async def runs(page) -> int:
    return await page.evaluate("() => window.__atlasRuns")


async def type_sentence(page, text: str, timeout: float) -> int:
    """bs.enter_text, async: fill the sidebar's text area, Ctrl+Enter, wait for a new finished run; typed again
    when the text area went back to another text without a run (as a student would). Returns the tries."""
    area, before = page.locator(".st-key-text textarea"), await runs(page)
    for tries in range(1, 4):
        await area.fill(text, timeout=timeout * 1000)
        await area.press("Control+Enter", timeout=timeout * 1000)
        await page.wait_for_function("""([n, sel, text]) => { const a = document.querySelector(sel);
            return window.__atlasRuns > n || (a !== null && a.value !== text); }""",
                                     arg=[before, ".st-key-text textarea", text], timeout=timeout * 1000, polling=100)
        if await runs(page) > before:
            await page.wait_for_function("([n, idle]) => window.__atlasRuns > n && document.querySelector(idle)",
                                         arg=[before, bs.IDLE], timeout=timeout * 1000, polling=100)
            return tries
    raise RuntimeError("the text area showed another text three times")


async def open_student(browser, i: int, url: str, text: str, delay: float, timeout: float) -> Student:
    await asyncio.sleep(delay)
    from browser_js import RUN_COUNTER_JS  # beside browser_support, in tests/

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    await context.add_init_script(RUN_COUNTER_JS)
    await context.add_init_script(LOG_JS)
    page = await context.new_page()
    await page.goto(link(url, text), timeout=timeout * 1000)
    await page.wait_for_function(PAGE_DONE_JS, arg=[bs.EXCEPTION, bs.IDLE, bs.TRANSLATION, bs.CHART],
                                 timeout=timeout * 1000, polling=100)
    s = Student(i, page, text)
    s.backend = await cookie(page)
    return s


async def student_loop(s: Student, sentences, end: float, args, rng: random.Random) -> None:
    while True:
        pause = args.every * rng.uniform(1 - args.jitter, 1 + args.jitter)
        if time.time() + pause >= end:
            return
        await asyncio.sleep(pause)
        text, t0 = next(sentences), time.time()
        try:
            tries = await type_sentence(s.page, text, args.fault_timeout)
            de = await s.page.locator(DE_LINE).first.inner_text(timeout=5000)
            shows = squash(de).endswith(squash(text))
            s.actions.append({"t": t0, "s": time.time() - t0, "text": text, "tries": tries, "error": "",
                              "shows": shows, "de": "" if shows else de,
                              "area": "" if shows else await s.page.locator(".st-key-text textarea").input_value()})
        except Exception as e:  # noqa: BLE001 - a timeout while the page is disconnected is a result
            s.actions.append({"t": t0, "s": None, "text": text, "tries": 0, "shows": False,
                              "error": f"{type(e).__name__}: {str(e)[:120]}"})


async def fault_class(url: str, deployment, args, sentences, sig: int) -> tuple[list[Student], float, str]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=bs.CHROMIUM, args=bs.CHROMIUM_ARGS, headless=True)
        try:
            rng = random.Random(7)
            students = await asyncio.gather(*(open_student(browser, i, url, next(sentences),
                                                           rng.uniform(0, args.every), args.timeout)
                                              for i in range(args.fault_pages)))
            kill_at = time.time() + args.fault_after
            end = kill_at + args.fault_for
            (killed, victim), *_ = await asyncio.gather(
                common.kill_busiest(deployment, lambda: [s.backend for s in students], kill_at, sig),
                *(student_loop(s, sentences, end, args, random.Random(s.i)) for s in students))
            for s in students:
                s.log = await s.page.evaluate("() => window.__crowdLog")
                s.backend_after = await cookie(s.page)
            return students, killed, victim
        finally:
            await browser.close()


def _action(a: dict, killed: float) -> str:
    if a["error"]:
        return f"{a['t'] - killed:+.1f} s: {a['error']}"
    return (f"{a['t'] - killed:+.1f} s: {a['s']:.2f} s, typed {a['tries']}x, shows " + ("its sentence" if a["shows"]
            else f"{a['de']!r} (typed {a['text']!r}), the text area holds {a['area']!r}"))


def judge(s: Student, killed: float, victim: str) -> dict:
    """What one student saw after the signal, from its page's log (wall-clock ms) and its actions."""
    after = [e for e in s.log if e["t"] >= killed * 1000]
    rel = lambda ms: round(ms / 1000 - killed, 2)  # noqa: E731
    noticed = [e["t"] for e in after if e["ev"] == "ws-close" or (e["ev"] in ("status", "dialog") and e["detail"])]
    acts = [a for a in s.actions if a["t"] + (a["s"] or 1e9) >= killed]  # in flight at the signal, or later
    later = [a for a in acts if a["t"] >= killed]
    out = {"student": s.i, "backend": s.backend, "backend_after": s.backend_after, "on_stopped": s.backend == victim,
           "noticed_after_s": rel(noticed[0]) if noticed else None,
           "shown": sorted({f"{e['ev']}: {e['detail']}" for e in after
                            if e["ev"] in ("status", "dialog", "exception", "error") and e["detail"]}),
           "websocket": [f"{e['ev']} {e['detail']}".strip() + f" at +{rel(e['t'])} s" for e in after
                         if e["ev"].startswith("ws-")],
           "errors_after": [a["error"] for a in acts if a["error"]],
           "actions_after": [_action(a, killed) for a in acts],
           "action_s_before": [round(a["s"], 2) for a in s.actions if a["t"] < killed and a["s"] is not None],
           "action_s_after": [round(a["s"], 2) for a in later if a["s"] is not None]}
    if s.backend != victim:
        return out
    drawn = [(e, json.loads(e["detail"])) for e in s.log if e["ev"] == "drawn"]
    back = next((e["t"] for e in after if e["ev"] == "ws-open"), None)  # the websocket to the other process
    # the first run the other process served (runs drawn between the signal and the reconnect came from the old one)
    first = next(((e, d) for e, d in drawn if back and d["ran"] >= back and not d["exception"]), None)
    before = [d["de"] for e, d in drawn if d["ran"] < (back or 1e15)][-1:]  # what the page showed until then
    new = [a for a in acts if a["t"] + (a["s"] or 1e9) >= (back or 0) / 1000]  # sentences the other process ran
    out.update(reconnected_s=rel(back) if back else None, first_run_s=rel(first[0]["t"]) if first else None,
               old_runs_after_signal=sum(killed * 1000 <= d["ran"] < (back or 1e15) for e, d in drawn),
               first_run_by_itself=bool(first and (not later or first[1]["ran"] < later[0]["t"] * 1000)),
               first_run_shows=first[1]["de"] if first else None,
               first_run_kept_sentence=bool(first and before and first[1]["de"] == before[0]),
               first_run_kept_view=bool(first and first[1]["view"] == "Attention"),
               first_edit_lost=bool(new and (new[0]["tries"] != 1 or not new[0]["shows"])),
               own_sentence_again_s=next((round(a["t"] + a["s"] - killed, 2) for a in new if a["shows"]), None))
    return out


def fault_phase(args, ckpt: Path, signame: str, sentences) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_crowd_fault_") as tmp, \
            serving(2, ckpt, args.model, Path(tmp), ENV) as served:
        students, killed, victim = asyncio.run(fault_class(served.url, served.deployment, args, sentences,
                                                           getattr(signal, f"SIG{signame}")))
        dead = served.dead()
    rows = [judge(s, killed, victim) for s in students]
    hit, rest = [r for r in rows if r["on_stopped"]], [r for r in rows if not r["on_stopped"]]
    count = lambda k: sum(bool(r[k]) for r in hit)  # noqa: E731
    times = lambda k: spread([r[k] for r in hit if r[k] is not None])  # noqa: E731
    return {"signal": f"SIG{signame}", "pages": len(rows), "stopped": victim, "on_stopped": len(hit),
            "noticed": sum(r["noticed_after_s"] is not None for r in hit), "reconnected": times("reconnected_s"),
            "first_run": times("first_run_s"), "first_run_by_itself": count("first_run_by_itself"),
            "first_run_kept_sentence": count("first_run_kept_sentence"),
            "first_run_kept_view": count("first_run_kept_view"), "first_edit_lost": count("first_edit_lost"),
            "old_runs_after_signal": sum(r["old_runs_after_signal"] for r in hit),
            "own_sentence_again": times("own_sentence_again_s"), "moved_to": sorted({r["backend_after"] for r in hit}),
            "shown": sorted({x for r in hit for x in r["shown"]}),
            "others_noticed": sum(r["noticed_after_s"] is not None or bool(r["shown"]) for r in rest),
            "others_errors": sum(len(r["errors_after"]) for r in rest),
            "others_action_before": spread([x for r in rest for x in r["action_s_before"]]),
            "others_action_after": spread([x for r in rest for x in r["action_s_after"]]),
            "processes_died": dead, "students": rows}


# ----------------------------------------------------------------------------- main

def _f(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def report(crowd: list[dict], faults: list[dict]) -> None:
    if crowd:
        print(table([[c["processes"], c["pages"], c["round"], f"{c['got_app']}/{c['pages']}", c["with_exception"],
                      c["timed_out"]] + [_f(c["first_drawn"][k]) for k in ("p50_s", "p95_s", "max_s")]
                     + [_f(c["server_start_s"]), " ".join(f"{k}={v}" for k, v in c["first_visits_per_backend"].items())]
                     for c in crowd], "procs pages round got_app exception timeout p50_s p95_s max_s start_s "
                    "pages_per_process".split()))
    if faults:
        mm = lambda d: f"{_f(d['p50_s'])}/{_f(d['max_s'])}"  # noqa: E731
        print("\nA process stopped mid-class; its students' reconnect, first run and own sentence shown again, in "
              "seconds after the signal (p50/max)")
        print(table([[f["signal"], f"{f['on_stopped']}/{f['pages']}", f["noticed"], mm(f["reconnected"]),
                      f"{mm(f['first_run'])} ({f['first_run_by_itself']})",
                      f"{f['first_run_kept_sentence']}/{f['first_run_kept_view']}", f["first_edit_lost"],
                      mm(f["own_sentence_again"]), f["others_noticed"], f["others_errors"],
                      f"{_f(f['others_action_before']['p50_s'])}/{_f(f['others_action_after']['p50_s'])}"]
                     for f in faults],
                    ["signal", "hit", "noticed", "reconnected s", "first run s (by itself)", "kept text/view",
                     "next edit lost", "own sentence s", "others noticed", "others errors",
                     "others p50 s before/after"]))
        for f in faults:
            print(f"  {f['signal']}: its students saw {'; '.join(f['shown']) or 'nothing'}; now on "
                  f"{', '.join(f['moved_to']) or '-'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--pages", type=int, nargs="+", default=[8, 16, 32], help="class sizes opening the link at once")
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2], help="1: direct; 2+: behind nginx")
    ap.add_argument("--rounds", type=int, default=1, help="fresh servers per (processes, pages)")
    ap.add_argument("--timeout", type=float, default=180, help="seconds a page may take to be drawn")
    ap.add_argument("--fault", action="store_true", help="also a class that loses a process mid-class")
    ap.add_argument("--fault-only", action="store_true", help="only the fault class (no crowd phases)")
    ap.add_argument("--fault-pages", type=int, default=8, help="students in the fault class")
    ap.add_argument("--fault-signal", nargs="+", default=["TERM", "KILL"], choices=["TERM", "KILL", "INT"])
    ap.add_argument("--fault-after", type=float, default=20, help="seconds of class before the signal")
    ap.add_argument("--fault-for", type=float, default=60, help="seconds of class after the signal")
    ap.add_argument("--fault-timeout", type=float, default=60, help="seconds one new sentence may take")
    ap.add_argument("--every", type=float, default=5, help="seconds between a result and the next sentence")
    ap.add_argument("--jitter", type=float, default=0.5)
    args = ap.parse_args()
    if (ready := common.server_preflight(args, nginx=args.fault or args.fault_only or max(args.processes) > 1)) is None:
        return 2
    ckpt = ready[1]
    started, sentence = time.perf_counter(), distinct_sentences(1)[0]
    crowd, faults = [], []
    for procs in ([] if args.fault_only else args.processes):
        for n in args.pages:
            for rnd in range(args.rounds):
                crowd.append(c := crowd_phase(procs, n, rnd + 1, args, ckpt, sentence))
                print(f"{procs} process(es), {n} pages at once: {c['got_app']} got the app, first drawn "
                      f"{c['first_drawn']}; errors {c['errors'][:3]}", flush=True)
    sentences = iter(distinct_sentences(4000)[1:])
    for name in (args.fault_signal if args.fault or args.fault_only else []):
        print(f"fault: {args.fault_pages} students on 2 processes, SIG{name} …", flush=True)
        faults.append(fault_phase(args, ckpt, name, sentences))
    print()
    report(crowd, faults)
    write_results("crowd", {
        "benchmark": "crowd", "checkpoint_dir": shown_path(ckpt), "model": args.model, "torch_threads": 1,
        "link": {"view": "Attention", "text": sentence}, "timeout_s": args.timeout, "rounds": args.rounds,
        "client": "Chromium pages (tests/crowd_support.py; the fault class: Playwright pages typing sentences)",
        "proxy": "nginx, cookie-sticky (deploy/nginx.conf.template)",
        "fault_settings": {k: getattr(args, k) for k in ("fault_pages", "fault_after", "fault_for", "fault_timeout",
                                                          "every", "jitter")} if faults else None,
        "wall_s": round(time.perf_counter() - started), "crowd": crowd, "faults": faults})
    return 1 if any(c["with_exception"] for c in crowd) else 0


if __name__ == "__main__":
    sys.exit(main())
