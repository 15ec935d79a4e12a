"""How much server CPU does one user action cost?

    python benchmarks/bench_server_cpu.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--repeats 10]
                                          [--settle-ms 300] [--tail-ms 500] [--idle-s 5]

Starts `streamlit run app.py`, opens the Attention view in Debian's Chromium (Playwright) and, --repeats times:
types a new sentence (Ctrl+Enter) on the Attention view, changes the layer, changes the head, then switches
through every page of the sidebar's "View" radio (a rotation with another step each round, back to Attention),
so each page switch is that page's first visit for the round's sentence. First it visits every page once
(to learn how many charts and tables each holds) and runs one whole round as a warm-up; neither counts.

For each action it reads the CPU time of the server process (utime + stime from /proc/PID/stat, which includes
all its threads, alive or ended, plus any child processes) just before the key or pointer press, waits as
bench_app.py does until the script run has finished and the page is drawn again, waits --settle-ms more for
the server to finish sending, and reads it again. /proc counts in clock ticks (10 ms with SC_CLK_TCK = 100),
so one action's reading is coarse: the table reports the mean (total over all repeats / actions) beside the
median, and the part of the main thread (Streamlit's event loop; each script run has a thread of its own).
It also reports the browser's wall time per action (measured in the page, as in bench_app.py), and whether
Streamlit keeps working after a run: the server's CPU in the --tail-ms after each reading (not counted in the
action), between actions, and while idle (--idle-s, before and after the actions).
Writes benchmarks/results/server_cpu.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from app_walk import (
    INPUT_CLOCK_JS,
    change_layer_or_head,
    checkpoint_config,
    new_sentence,
    page_switch,
    settle_view,
    view_cycles,
    views_of,
)
from bench_memory import descendants
from common import (
    ROOT,
    add_server_args,
    distinct_sentences,
    machine,
    server_preflight,
    shown_path,
    table,
    verdict,
    write_results,
)

TARGETS = {"cpu_s_per_action": 0.1}
TICKS = os.sysconf("SC_CLK_TCK")
NOTES = ("CPU of the streamlit process (all threads, plus child processes) from /proc/PID/stat, read just "
         "before the key/pointer press and settle_ms after the page was drawn again; resolution one clock "
         "tick, so use the means. main_thread_cpu_s: the part used by the process's main thread "
         "(Streamlit's event loop: websocket traffic; each script run has its own thread). page_s: the "
         "browser's wall time from the press to the drawn frame "
         "(bench_app.py's measure); wall_s: the same seen from Python, including Playwright's polling. "
         "tail_cpu_s: server CPU in the tail_ms after that (not counted in cpu_s). gap_*: server CPU from "
         "one action's last reading to the next action's first. Each round types "
         "a new sentence, so each page switch of a round is that page's first visit for the sentence "
         "(except Attention, where it was typed).")


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by pid with all its threads, and by its child processes."""
    ticks = 0
    for p in descendants(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17
        ticks += sum(int(x) for x in fields[11:15])
    return ticks / TICKS


def main_thread_cpu_seconds(pid: int) -> float:
    """CPU seconds of pid's main thread alone: in Streamlit the event loop (websocket traffic, sending the
    messages), while each script run has a thread of its own."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


class Meter:
    """Reads the server's CPU around each action and keeps every sample."""

    def __init__(self, pid: int, settle_s: float, tail_s: float = 0.0):
        self.pid, self.settle_s, self.tail_s, self.samples = pid, settle_s, tail_s, []
        self._last = None  # (cpu, time) of the previous action's second reading

    def measure(self, kind: str, act, **info) -> dict:
        """act(before) performs the action, calling before() just before the press, and returns the page's seconds."""
        start = {}

        def before():
            start["main"], start["cpu"], start["t"] = (main_thread_cpu_seconds(self.pid), cpu_seconds(self.pid),
                                                       time.perf_counter())

        page_s = act(before)
        done = time.perf_counter()
        time.sleep(self.settle_s)
        cpu, main, now = cpu_seconds(self.pid), main_thread_cpu_seconds(self.pid), time.perf_counter()
        sample = {"kind": kind, **info, "cpu_s": cpu - start["cpu"], "main_thread_cpu_s": main - start["main"],
                  "page_s": page_s, "wall_s": done - start["t"]}
        if self.tail_s > 0:  # does the server keep working after the settle wait?
            time.sleep(self.tail_s)
            tail = cpu_seconds(self.pid)
            sample["tail_cpu_s"], cpu, now = tail - cpu, tail, time.perf_counter()
        if self._last is not None:
            sample["gap_cpu_s"], sample["gap_s"] = start["cpu"] - self._last[0], start["t"] - self._last[1]
        self._last = (cpu, now)
        self.samples.append(sample)
        return sample

    def discard(self) -> None:
        """Forget everything measured so far (the warm-up)."""
        self.samples, self._last = [], None


def idle_cpu(pid: int, seconds: float) -> dict:
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    c1, t1 = cpu_seconds(pid), time.perf_counter()
    return {"seconds": t1 - t0, "cpu_s": c1 - c0, "cpu_per_s": (c1 - c0) / (t1 - t0)}


def stats(samples: list[dict]) -> dict:
    cpu = [s["cpu_s"] for s in samples]
    page = sorted(s["page_s"] * 1000 for s in samples)
    q = statistics.quantiles(cpu, n=10, method="inclusive") if len(cpu) > 1 else [cpu[0]] * 9
    out = {"n": len(cpu), "cpu_total_s": sum(cpu), "cpu_mean_s": sum(cpu) / len(cpu),
           "main_thread_cpu_mean_s": sum(s["main_thread_cpu_s"] for s in samples) / len(cpu),
           "cpu_median_s": statistics.median(cpu), "cpu_p90_s": q[-1], "cpu_max_s": max(cpu),
           "page_median_ms": statistics.median(page), "page_max_ms": page[-1]}
    tails = [s["tail_cpu_s"] for s in samples if "tail_cpu_s" in s]
    if tails:
        out["tail_cpu_mean_s"] = sum(tails) / len(tails)
    return out


def measure_rounds(bs, page, meter: Meter, sentences: list[str], cfg: dict, repeats: int) -> dict:
    """Round 0 (a warm-up, discarded) and `repeats` measured rounds of: a new sentence, a layer change, a head
    change, a page switch to every view. Returns what each view's page holds (from one settling visit first)."""
    layers, heads = cfg["n_decoder_layers"], cfg["n_heads"]  # the Attention view opens on cross-attention
    views = views_of(bs, page)
    start = bs.selected_view(page)
    gen = 0
    bs.enter_text(page, sentences[0], timeout=120_000)
    expect = {view: settle_view(bs, page, view) for view in view_cycles(views, start, 1)}
    for r in range(repeats + 1):  # round 0 is a warm-up
        gen += 1
        meter.measure("new sentence", lambda before: new_sentence(
            bs, page, sentences[r + 1], gen, before=before))
        layer, head = (int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head"))
        if layers > 1:
            layer = layer % layers + 1
            gen += 1
            meter.measure("layer change", lambda before: change_layer_or_head(
                bs, page, "layer", layer, layer, head, gen, before=before))
        if heads > 1:
            head = head % heads + 1
            gen += 1
            meter.measure("head change", lambda before: change_layer_or_head(
                bs, page, "head", head, layer, head, gen, before=before))
        for view in view_cycles(views, start, 1, first_step=max(r, 1)):
            gen += 1
            meter.measure(f"page switch to {view}", lambda before: page_switch(
                bs, page, view, gen, expect[view], before=before), view=view)
        if r == 0:
            meter.discard()
            print("warm-up round done", flush=True)
        else:
            print(f"round {r}: {len(meter.samples)} actions measured", flush=True)
    return expect


def summarise(samples: list[dict]) -> tuple[dict, dict, dict]:
    """Per kind of action (plus every page switch together), every action, and the CPU between actions."""
    kinds = list(dict.fromkeys(s["kind"] for s in samples))
    per_kind = {k: stats([s for s in samples if s["kind"] == k]) for k in kinds}
    pages = [s for s in samples if s["kind"].startswith("page switch")]
    per_kind_all = dict(per_kind)
    if pages:
        per_kind_all["page switch, every view"] = stats(pages)
    every = stats(samples)
    gaps = [s for s in samples if "gap_s" in s]
    gap_cpu, gap_s = sum(s["gap_cpu_s"] for s in gaps), sum(s["gap_s"] for s in gaps)
    between = {"n": len(gaps), "cpu_s": gap_cpu, "seconds": gap_s, "cpu_per_s": gap_cpu / gap_s if gap_s else None}
    return per_kind_all, every, between


def print_report(per_kind_all: dict, every: dict, between: dict, idle_before: dict, idle_after: dict,
                 tail_ms: float) -> list[tuple]:
    """Print the table per action and the idle CPU; returns the target checks (printed too)."""
    def row(name, st):
        return [name, st["n"], st["cpu_mean_s"] * 1000, st["main_thread_cpu_mean_s"] * 1000, st["cpu_median_s"] * 1000,
                st["cpu_p90_s"] * 1000, st["cpu_max_s"] * 1000, st.get("tail_cpu_mean_s", float("nan")) * 1000,
                st["page_median_ms"]]

    rows = [row(k, st) for k, st in per_kind_all.items()] + [row("every action", every)]
    print()
    print(table(rows, ["action", "n", "CPU mean ms", "main thread", "CPU median", "p90", "max",
                       f"then in {tail_ms:.0f} ms", "page median ms"]))
    gap_s = between["seconds"]
    print(f"\nserver CPU while idle: {idle_before['cpu_per_s'] * 1000:.1f} ms/s before, "
          f"{idle_after['cpu_per_s'] * 1000:.1f} ms/s after; between actions (from the last reading after one "
          f"action to the next press): {between['cpu_per_s'] * 1000 if gap_s else float('nan'):.1f} ms/s "
          f"over {gap_s:.1f} s")
    limit = TARGETS["cpu_s_per_action"]
    checks = [(f"{k}, mean CPU", f"{st['cpu_mean_s']:.3f} s", f"<= {limit:g} s per action",
               verdict(st["cpu_mean_s"], limit)) for k, st in per_kind_all.items()]
    print()
    print(table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    return checks


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--repeats", type=int, default=10, help="rounds of: new sentence, layer, head, every page")
    ap.add_argument("--settle-ms", type=float, default=300, help="wait after the page is drawn before reading CPU")
    ap.add_argument("--tail-ms", type=float, default=500,
                    help="after the settle wait, wait this much more and read the CPU again (0: off): what the server "
                         "still used then, reported apart")
    ap.add_argument("--idle-s", type=float, default=5, help="seconds of idle CPU measured before and after")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    ready = server_preflight(args)
    if ready is None:
        return 2
    bs, ckpt_dir, env = ready
    from playwright.sync_api import sync_playwright

    cfg = checkpoint_config(ckpt_dir / args.model)
    sentences = distinct_sentences(args.repeats + 2)
    with tempfile.TemporaryDirectory(prefix="bench_server_cpu_") as tmp, sync_playwright() as p:
        chromium = bs.launch_chromium(p)
        server = bs.start_server(ckpt_dir, args.model, Path(tmp) / "server.log", timeout=120, extra_env=env)
        pid = server.proc.pid
        try:
            page = bs.new_page(chromium, timeout=120_000)
            bs.open_app(page, server.link(view="Attention"), timeout=120_000)
            bs.wait_charts(page, timeout=120_000)
            page.evaluate(INPUT_CLOCK_JS)
            time.sleep(1)  # let the first page's messages go out
            idle_before = idle_cpu(pid, args.idle_s)
            print(f"idle: {idle_before['cpu_per_s'] * 1000:.1f} ms CPU per s", flush=True)
            meter = Meter(pid, args.settle_ms / 1000, args.tail_ms / 1000)
            expect = measure_rounds(bs, page, meter, sentences, cfg, args.repeats)
            time.sleep(1)
            idle_after = idle_cpu(pid, args.idle_s)
            exceptions = page.locator(bs.EXCEPTION).count()
            page.context.close()
            total_cpu = cpu_seconds(pid)
        finally:
            bs.stop_server(server)
            chromium.close()

    samples = meter.samples
    per_kind_all, every, between = summarise(samples)
    checks = print_report(per_kind_all, every, between, idle_before, idle_after, args.tail_ms)
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    path = write_results("server_cpu", {
        "benchmark": "server_cpu", "checkpoint_dir": shown_path(ckpt_dir), "model": args.model, "repeats": args.repeats,
        "settle_ms": args.settle_ms, "tail_ms": args.tail_ms, "clock_ticks_per_s": TICKS,
        "torch_threads": args.torch_threads or 1,
        "machine": machine(), "server_cpu_total_s": total_cpu,
        "idle_before": idle_before, "idle_after": idle_after, "between_actions": between,
        "per_kind": per_kind_all, "every_action": every, "page_expect": expect, "samples": samples,
        "exceptions_seen": exceptions, "targets": TARGETS,
        "checks": [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks],
        "notes": NOTES,
    })
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
