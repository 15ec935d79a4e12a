"""Does the server's memory settle, or keep growing, as sentences come in?

    python benchmarks/bench_memory.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--sentences 200]

--sentences sentences typed on Attention in Chromium; the server's VmRSS (children included) after each. The app caches
64 traces, so memory grows while that cache fills; a leak grows without levelling off. Writes results/memory.json.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import app_walk as walk
import common
from common import add_server_args, distinct_sentences, server_preflight, status_mb, table, verdict, write_results

TARGETS = {"rss_mb": 600.0, "growth_last_100_mb": 50.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_args(ap)
    ap.add_argument("--sentences", type=int, default=200)
    args = ap.parse_args()

    if (ready := server_preflight(args)) is None:
        return 2
    bs, ckpt_dir, env = ready
    from playwright.sync_api import sync_playwright

    sentences = distinct_sentences(args.sentences)
    samples: list[float] = []
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as tmp, sync_playwright() as p:
        server = bs.start_server(ckpt_dir, args.model, Path(tmp) / "server.log", timeout=120, extra_env=env)
        chromium = bs.launch_chromium(p)
        try:
            idle_mb = status_mb(server.proc.pid)
            page = walk.open_drawn(bs, chromium, server.link(view="Attention"))
            first_mb = status_mb(server.proc.pid)
            for i, text in enumerate(sentences, 1):
                bs.enter_text(page, text, timeout=120_000)
                samples.append(status_mb(server.proc.pid))
                if i % 25 == 0 or i == len(sentences):
                    print(f"{i:>4} sentences: RSS {samples[-1]:.0f} MB", flush=True)
            exceptions = page.locator(bs.EXCEPTION).count()
            page.context.close()
        finally:
            chromium.close()
            bs.stop_server(server)

    n = len(samples)
    window = min(100, n - 1)
    growth = samples[-1] - samples[-1 - window] if window > 0 else 0.0
    rows = [["server started, no session", idle_mb], ["first page drawn", first_mb]]
    rows += [[f"after {k} sentences", samples[k - 1]] for k in sorted({1, n // 4, n // 2, 3 * n // 4, n} - {0})]
    rows += [["peak", max(samples)], [f"growth over the last {window} sentences", f"{growth:+.1f}"]]
    print("\n" + table(rows, ["server RSS (with children)", "MB"]))
    checks = [(f"RSS after {n} sentences", f"{samples[-1]:.0f} MB", "<= 600 MB",
               verdict(samples[-1], TARGETS["rss_mb"])),
              (f"growth over the last {window}", f"{growth:+.1f} MB", "<= 50 MB",
               verdict(growth, TARGETS["growth_last_100_mb"]))]
    print("\n" + table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    if exceptions:
        print(f"\nWARNING: the page showed {exceptions} exception box(es) at the end")
    write_results("memory", {
        "benchmark": "memory", "checkpoint_dir": common.shown_path(ckpt_dir), "model": args.model, "sentences": n,
        "torch_threads": args.torch_threads or 1, "seconds": time.perf_counter() - t_start,
        "rss_mb_idle": idle_mb, "rss_mb_first_page": first_mb, "rss_mb_after_each": samples,
        "rss_mb_final": samples[-1], "rss_mb_peak": max(samples), "growth_window": window, "growth_mb": growth,
        "exceptions_seen": exceptions, "targets": TARGETS,
        "checks": [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
