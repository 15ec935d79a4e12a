"""axe-core's WCAG 2.1 A/AA check of every view, in normal, presenter and high-contrast mode.

    python benchmarks/bench_axe.py [--checkpoint-dir checkpoints] [--model multi30k-de-en] [--out axe]

Starts `streamlit run app.py` on the shipped model, opens each view through a link in Debian's Chromium
(one fresh session per view and mode), waits until its charts are drawn, runs axe-core (tags wcag2a, wcag2aa,
wcag21a, wcag21aa; the copy bundled with axe-playwright-python) and prints per view and mode the failed rules
by impact (critical/serious/moderate/minor), with how many elements each concerns. Writes
benchmarks/results/<out>.json. tests/test_browser_axe.py runs the same check on the tiny test model.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from common import RESULTS, ROOT, machine  # also puts tests/ (the browser helpers) and the repository on sys.path

# isort: split
import browser_support as bs  # noqa: E402
from axe_support import IMPACTS, MODES, TAGS, open_view, run_axe, summarize  # noqa: E402
from model.records import VIEWS  # noqa: E402


def measure(checkpoint_dir: str, model: str, views: list[str], modes: list[str]) -> dict:
    """{mode: {view: summary}} from one server and one browser."""
    from playwright.sync_api import sync_playwright

    server = bs.start_server(checkpoint_dir, model, Path(tempfile.gettempdir()) / "atlas-axe.log", timeout=120)
    out: dict = {m: {} for m in modes}
    try:
        with sync_playwright() as p:
            browser = bs.launch_chromium(p)
            for mode in modes:
                for view in views:
                    page = bs.new_page(browser)
                    try:
                        open_view(page, server, view, mode)
                        out[mode][view] = summarize(run_axe(page))
                    finally:
                        page.context.close()
                    print_row(mode, view, out[mode][view])
            browser.close()
    finally:
        bs.stop_server(server)
    return out


def print_row(mode: str, view: str, s: dict) -> None:
    counts = " ".join(f"{s['nodes_by_impact'][i]:>3}" for i in IMPACTS)
    rules = ", ".join(f"{rule} ({r['impact']}, {r['nodes']})" for rule, r in s["rules"].items()) or "-"
    print(f"{mode:<13} {view:<20} {counts}   {rules}", flush=True)


def totals(results: dict) -> dict:
    """Elements per impact over every view, per mode."""
    return {mode: {i: sum(s["nodes_by_impact"][i] for s in per_view.values()) for i in IMPACTS}
            for mode, per_view in results.items()}


def commit(root: Path) -> str:
    """The commit checked: HEAD of the repository, or what a `git archive` copy's COMMIT file says."""
    if (root / "COMMIT").is_file():
        return (root / "COMMIT").read_text().strip()
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint-dir", default="checkpoints")
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--views", nargs="*", default=list(VIEWS), choices=list(VIEWS))
    ap.add_argument("--modes", nargs="*", default=list(MODES), choices=list(MODES))
    ap.add_argument("--out", default="axe", help="the result file's name in benchmarks/results/ (without .json)")
    ap.add_argument("--app-root", default=str(ROOT),
                    help="the checkout whose `streamlit run app.py` is checked (e.g. an older commit, unpacked with "
                         "`git archive`), with this script's axe run")
    args = ap.parse_args()
    bs.ROOT = Path(args.app_root).resolve()  # start_server runs `streamlit run app.py` there
    missing = bs.chromium_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    if not (ROOT / args.checkpoint_dir / args.model / "config.json").is_file() and \
            not (Path(args.checkpoint_dir) / args.model / "config.json").is_file():
        print(f"No checkpoint {args.model} in {args.checkpoint_dir}.", file=sys.stderr)
        return 2
    print(f"{'mode':<13} {'view':<20} " + " ".join(f"{i[:3]:>3}" for i in IMPACTS) + "   rules (impact, elements)")
    results = measure(str(Path(args.checkpoint_dir).resolve()), args.model, args.views, args.modes)
    tot = totals(results)
    for mode, counts in tot.items():
        print(f"{mode}: " + ", ".join(f"{counts[i]} {i}" for i in IMPACTS) + " elements over every view")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{args.out}.json"
    # a checkout elsewhere is named by its commit, not by this machine's folder
    argv = [f"<checkout of {commit(bs.ROOT)}>" if a == args.app_root and bs.ROOT != ROOT else a for a in sys.argv[1:]]
    path.write_text(json.dumps({"command": "python benchmarks/bench_axe.py " + shlex.join(argv),
                                "commit": commit(bs.ROOT), "checkpoint_dir": args.checkpoint_dir, "model": args.model,
                                "tags": TAGS, "machine": machine(), "totals": tot, "results": results},
                               indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
