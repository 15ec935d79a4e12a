"""How much server CPU does one user action cost, and does the server's memory settle?

    python benchmarks/bench_server_cpu.py [--repeats 10] [--settle-ms 300] [--tail-ms 500]   (server_cpu.json)
    python benchmarks/bench_server_cpu.py --blas [--repeats 10] [--tail-ms 500]               (blas_spin.json)
    python benchmarks/bench_server_cpu.py --memory [--sentences 200]                          (memory.json)

Attention in Chromium; --repeats rounds after a warm-up: a new sentence, a layer and a head change, every page (each
switch that page's first visit for the sentence). The server's CPU (all threads and children, /proc/PID/stat, 10 ms
resolution: means beside medians) from just before the press to --settle-ms after the page is drawn again
(app_walk.py), its main thread's part, and the CPU in the --tail-ms after. --blas: the Embeddings page's
nearest-neighbour table here with OpenBLAS at one thread (the app's) and one per core, CPU until --tail-ms after.
--memory: --sentences sentences typed on Attention, the server's VmRSS (children included) after each; the app caches
64 traces, so memory grows while that cache fills; a leak grows without levelling off.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import app_walk as walk
import common
from common import TICKS, cpu_seconds, distinct_sentences, print_checks, summary, table, verdict, write_results

TARGETS = {"cpu_s_per_action": 0.1}
MEMORY_TARGETS = {"rss_mb": 600.0, "growth_last_100_mb": 50.0}
NOTES = ("cpu_s: the server's CPU (all threads, children) from the press to settle_ms after the page was drawn; one "
         "clock tick resolution, so use the means. main_thread_cpu_s: its event loop's part. page_s: the browser's "
         "time from the press to the drawn frame; wall_s: the same from Python. tail_cpu_s: server CPU in the tail_ms "
         "after that (not in cpu_s).")


class Meter:
    """Reads the server's CPU around each action and keeps every sample."""

    def __init__(self, pid: int, settle_s: float, tail_s: float = 0.0):
        self.pid, self.settle_s, self.tail_s, self.samples = pid, settle_s, tail_s, []

    def measure(self, kind: str, act, **info) -> dict:
        """act(before) performs the action, calling before() just before the press, and returns the page's seconds."""
        start = {}

        def before():
            start["main"], start["cpu"], start["t"] = (cpu_seconds(self.pid, True), cpu_seconds(self.pid),
                                                       time.perf_counter())

        page_s = act(before)
        done = time.perf_counter()
        time.sleep(self.settle_s)
        cpu, main = cpu_seconds(self.pid), cpu_seconds(self.pid, main_thread=True)
        sample = {"kind": kind, **info, "cpu_s": cpu - start["cpu"], "main_thread_cpu_s": main - start["main"],
                  "page_s": page_s, "wall_s": done - start["t"]}
        if self.tail_s > 0:  # does the server keep working after the settle wait?
            time.sleep(self.tail_s)
            sample["tail_cpu_s"] = cpu_seconds(self.pid) - cpu
        self.samples.append(sample)
        return sample


def stats(samples: list[dict]) -> dict:
    cpu, q, page = [s["cpu_s"] for s in samples], summary([s["cpu_s"] for s in samples]), summary(
        [s["page_s"] for s in samples])
    out = {"n": len(cpu), "cpu_total_s": sum(cpu), "cpu_mean_s": sum(cpu) / len(cpu),
           "main_thread_cpu_mean_s": sum(s["main_thread_cpu_s"] for s in samples) / len(cpu),
           "cpu_median_s": q["median_ms"] / 1000, "cpu_p90_s": q["p90_ms"] / 1000, "cpu_max_s": max(cpu),
           "page_median_ms": page["median_ms"], "page_max_ms": page["max_ms"]}
    tails = [s["tail_cpu_s"] for s in samples if "tail_cpu_s" in s]
    if tails:
        out["tail_cpu_mean_s"] = sum(tails) / len(tails)
    return out


def measure_rounds(bs, page, meter: Meter, sentences: list[str], cfg: dict, repeats: int) -> dict:
    """Round 0 (a warm-up, discarded) and `repeats` measured rounds of: a new sentence, a layer change, a head
    change, a page switch to every view. Returns what each view's page holds (from one settling visit first)."""
    layers, heads = cfg["n_decoder_layers"], cfg["n_heads"]  # the Attention view opens on cross-attention
    views = walk.views_of(bs, page)
    start = bs.selected_view(page)
    gen = 0
    bs.enter_text(page, sentences[0], timeout=120_000)
    expect = {view: walk.settle_view(bs, page, view) for view in walk.view_cycles(views, start, 1)}
    change, switch = partial(walk.change_layer_or_head, bs, page), partial(walk.page_switch, bs, page)
    for r in range(repeats + 1):  # round 0 is a warm-up
        gen += 1
        meter.measure("new sentence", partial(walk.new_sentence, bs, page, sentences[r + 1], gen))
        layer, head = (int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head"))
        if layers > 1:
            layer = layer % layers + 1
            gen += 1
            meter.measure("layer change", partial(change, "layer", layer, layer, head, gen))
        if heads > 1:
            head = head % heads + 1
            gen += 1
            meter.measure("head change", partial(change, "head", head, layer, head, gen))
        for view in walk.view_cycles(views, start, 1, first_step=max(r, 1)):
            gen += 1
            meter.measure(f"page switch to {view}", partial(switch, view, gen, expect[view]), view=view)
        if r == 0:
            meter.samples = []  # the warm-up
            print("warm-up round done", flush=True)
        else:
            print(f"round {r}: {len(meter.samples)} actions measured", flush=True)
    return expect


def summarise(samples: list[dict]) -> tuple[dict, dict]:
    """Per kind of action (plus every page switch together), and every action."""
    per_kind = {k: stats([s for s in samples if s["kind"] == k]) for k in dict.fromkeys(s["kind"] for s in samples)}
    pages = [s for s in samples if s["kind"].startswith("page switch")]
    return per_kind | ({"page switch, every view": stats(pages)} if pages else {}), stats(samples)


def print_report(per_kind_all: dict, every: dict, tail_ms: float) -> list[dict]:
    """Print the table per action; returns the target checks (printed too)."""
    def row(name, st):
        return [name, st["n"], st["cpu_mean_s"] * 1000, st["main_thread_cpu_mean_s"] * 1000, st["cpu_median_s"] * 1000,
                st["cpu_p90_s"] * 1000, st["cpu_max_s"] * 1000, st.get("tail_cpu_mean_s", float("nan")) * 1000,
                st["page_median_ms"]]

    rows = [row(k, st) for k, st in per_kind_all.items()] + [row("every action", every)]
    print("\n" + table(rows, ["action", "n", "CPU mean ms", "main thread", "CPU median", "p90", "max",
                       f"then in {tail_ms:.0f} ms", "page median ms"]))
    limit = TARGETS["cpu_s_per_action"]
    return print_checks([(f"{k}, mean CPU", f"{st['cpu_mean_s']:.3f} s", f"<= {limit:g} s per action",
                          verdict(st["cpu_mean_s"], limit)) for k, st in per_kind_all.items()])


def blas_main(args) -> int:
    """The nearest-neighbour table with one BLAS thread and with one per core, alternating (see above)."""
    from threadpoolctl import threadpool_limits

    from viz.embeddings import nearest_neighbours

    translator = common.open_translator(Path(args.checkpoint_dir) / args.model, threads=1)
    if translator is None:
        return 2
    lut, itos = translator.embedding_matrix("src")  # (V, d), as the Embeddings page gets it
    runs = {n: {"wall": [], "cpu": []} for n in (1, os.cpu_count() or 1)}
    for i in range(args.repeats + 1):  # the first round warms up
        for n, got in runs.items():
            with threadpool_limits(limits=n, user_api="blas"):
                time.sleep(args.tail_ms / 1000)  # whatever spun before has stopped
                c0, t0 = common.own_cpu_seconds(), time.perf_counter()
                nearest_neighbours(lut, itos, list(range(10, 22)), k=5, exclude_idx=())  # a sentence's 12 entries
                wall = time.perf_counter() - t0
                time.sleep(args.tail_ms / 1000)
                if i:
                    got["wall"].append(wall)
                    got["cpu"].append(common.own_cpu_seconds() - c0)
    out = {str(n): {"wall_ms": 1000 * statistics.median(r["wall"]), "cpu_ms": 1000 * statistics.median(r["cpu"])}
           for n, r in runs.items()}
    print(table([[f"{n} BLAS thread(s)", v["wall_ms"], v["cpu_ms"]] for n, v in out.items()],
                ["OpenBLAS", "wall ms", f"CPU ms (until {args.tail_ms:.0f} ms after)"]))
    write_results("blas_spin", {"benchmark": "blas_spin", "model": args.model, "cores": os.cpu_count(),
                                "repeats": args.repeats, "tail_ms": args.tail_ms, "threads": out})
    return 0


@contextlib.contextmanager
def server_and_browser(bs, ckpt_dir: Path, args, env: dict):
    """Chromium and a fresh server (stopped afterwards)."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="bench_server_cpu_") as tmp, sync_playwright() as p:
        chromium = bs.launch_chromium(p)
        server = bs.start_server(ckpt_dir, args.model, Path(tmp) / "server.log", timeout=120, extra_env=env)
        try:
            yield chromium, server
        finally:
            bs.stop_server(server)
            chromium.close()


def memory_main(args, bs, ckpt_dir: Path, env: dict) -> int:
    """--memory: the server's VmRSS (children included) after each of --sentences sentences typed on Attention."""
    samples, t_start = [], time.perf_counter()
    with server_and_browser(bs, ckpt_dir, args, env) as (chromium, server):
        idle_mb = common.status_mb(server.proc.pid)
        page = walk.open_drawn(bs, chromium, server.link(view="Attention"))
        first_mb = common.status_mb(server.proc.pid)
        for i, text in enumerate(distinct_sentences(args.sentences), 1):
            bs.enter_text(page, text, timeout=120_000)
            samples.append(common.status_mb(server.proc.pid))
            if i % 25 == 0 or i == args.sentences:
                print(f"{i:>4} sentences: RSS {samples[-1]:.0f} MB", flush=True)
        exceptions = page.locator(bs.EXCEPTION).count()
        page.context.close()
    n, window = len(samples), min(100, len(samples) - 1)
    growth = samples[-1] - samples[-1 - window] if window > 0 else 0.0
    rows = [["server started, no session", idle_mb], ["first page drawn", first_mb]]
    rows += [[f"after {k} sentences", samples[k - 1]] for k in sorted({1, n // 4, n // 2, 3 * n // 4, n} - {0})]
    rows += [["peak", max(samples)], [f"growth over the last {window} sentences", f"{growth:+.1f}"]]
    print("\n" + table(rows, ["server RSS (with children)", "MB"]))
    checks = print_checks([(f"RSS after {n} sentences", f"{samples[-1]:.0f} MB", "<= 600 MB",
                            verdict(samples[-1], MEMORY_TARGETS["rss_mb"])),
                           (f"growth over the last {window}", f"{growth:+.1f} MB", "<= 50 MB",
                            verdict(growth, MEMORY_TARGETS["growth_last_100_mb"]))])
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    write_results("memory", {
        "benchmark": "memory", "checkpoint_dir": common.shown_path(ckpt_dir), "model": args.model, "sentences": n,
        "torch_threads": args.torch_threads or 1, "seconds": time.perf_counter() - t_start,
        "rss_mb_idle": idle_mb, "rss_mb_first_page": first_mb, "rss_mb_after_each": samples,
        "rss_mb_final": samples[-1], "rss_mb_peak": max(samples), "growth_window": window, "growth_mb": growth,
        "exceptions_seen": exceptions, "targets": MEMORY_TARGETS, "checks": checks})
    return 0


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_server_args(ap)
    ap.add_argument("--repeats", type=int, default=10, help="rounds of: new sentence, layer, head, every page")
    ap.add_argument("--settle-ms", type=float, default=300, help="wait after the page is drawn before reading CPU")
    ap.add_argument("--tail-ms", type=float, default=500,
                    help="after the settle wait, wait this much more and read the CPU again (0: off): what the server "
                         "still used then, reported apart")
    ap.add_argument("--blas", action="store_true", help="only the BLAS threads' cost, in this process (no server)")
    ap.add_argument("--memory", action="store_true", help="the server's memory as sentences come in")
    ap.add_argument("--sentences", type=int, default=200, help="--memory: sentences typed")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    if args.blas:
        return blas_main(args)
    if (ready := common.server_preflight(args)) is None:
        return 2
    bs, ckpt_dir, env = ready
    if args.memory:
        return memory_main(args, bs, ckpt_dir, env)
    cfg = walk.checkpoint_config(ckpt_dir / args.model)
    sentences = distinct_sentences(args.repeats + 2)
    with server_and_browser(bs, ckpt_dir, args, env) as (chromium, server):
        page = walk.open_drawn(bs, chromium, server.link(view="Attention"))
        page.evaluate(walk.INPUT_CLOCK_JS)
        time.sleep(1)  # let the first page's messages go out
        meter = Meter(pid := server.proc.pid, args.settle_ms / 1000, args.tail_ms / 1000)
        expect = measure_rounds(bs, page, meter, sentences, cfg, args.repeats)
        exceptions = page.locator(bs.EXCEPTION).count()
        page.context.close()
        total_cpu = cpu_seconds(pid)

    samples = meter.samples
    per_kind_all, every = summarise(samples)
    checks = print_report(per_kind_all, every, args.tail_ms)
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    write_results("server_cpu", {
        "benchmark": "server_cpu", "checkpoint_dir": common.shown_path(ckpt_dir), "model": args.model,
        "repeats": args.repeats, "settle_ms": args.settle_ms, "tail_ms": args.tail_ms, "clock_ticks_per_s": TICKS,
        "torch_threads": args.torch_threads or 1, "server_cpu_total_s": total_cpu,
        "per_kind": per_kind_all, "every_action": every, "page_expect": expect, "samples": samples,
        "exceptions_seen": exceptions, "targets": TARGETS,
        "checks": checks, "notes": NOTES})
    return 0


if __name__ == "__main__":
    sys.exit(main())
