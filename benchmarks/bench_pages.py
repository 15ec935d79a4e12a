"""How quickly do the app's pages answer in a real browser: alone, against a floor, against another version?

    python benchmarks/bench_pages.py [--repeats 10] [--cold-repeats 3] [--page-cycles N] [--shape NAME]  (app.json)
    python benchmarks/bench_pages.py --baseline floor|"ref=REF[;REF…]" --walks N [--cold-only]        (floor.json)
    python benchmarks/bench_pages.py --baseline "ref=REF[;REF…]" [--actions switch:VIEW sentence …]     (ab.json)
    python benchmarks/bench_pages.py --profile [--baseline floor|ref=…] [--views …] [--save-traces DIR]  (profile.json)

Times are taken in the page, from the press until the run has finished and every chart concerned has plotted again
(app_walk.py). Alone: cold starts, then on Attention new sentences, layer, head and kind changes, page switches.
--shape (--opus-size: opus-mt-de-en): a published shape with random weights (common.py), translations capped at 20
tokens. Walks: each variant on a fresh server and Chromium in turn, the order reversed every other walk: the cold
start, a new sentence, every other view's first visit (not What if); app / variant (floor: floor_app.py; a ref:
<= 1.05). A REF is a COMMIT or DIR, public (every private-name device off), off:A,B (those speed devices off,
viz/speed.py) or url:K=V,… (this one, its session opened with those URL parameters, e.g. url:carry=alti). Without
--walks, refs are served side by side with this one and a control copy, a tab each, every action on each in turn.
--profile: each first visit of a walk under Chromium's performance trace.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import app_walk as walk
import common
import shapes
from common import ROOT, checkout_name, distinct_sentences, summary, table, verdict, write_results

TARGETS = {"cold_start_s": 4.0, "new_sentence_s": 0.5, "layer_head_s": 0.25, "page_switch_s": 0.5}
FLOOR_TARGETS = {"first_visit": 1.25, "first_visits": 1.25, "new_sentence": 1.0, "cold_start": 1.2}  # app/floor
REF_LIMIT = 1.05  # app / another version (or this one with a speed device off), at most
OPUS_LINK = {"kind": "cross", "layer": 1, "head": 1, "max_len": 20}
PAUSE_S = 0.3  # after each side-by-side action: the browser's idle work settles before the next


def served(ref: str, args, stack: contextlib.ExitStack) -> str:
    """The app.py of checkout `ref` (a COMMIT or DIR; public or off:NAME: this one), compiled first unless
    --from-source."""
    root = ROOT if ref == "public" or ref.startswith(("off:", "url:")) else common.checkout(ref, stack)
    if root != ROOT and not args.from_source and not common.compile_checkout(root):
        raise SystemExit(f"compiling {root} failed (see above)")
    return str(root / "app.py")


def ref_env(ref: str) -> dict:
    """public: every private-name device off; off:A,B: those speed devices off (viz/speed.py); else nothing."""
    return {"ATLAS_PUBLIC_ONLY": "1"} if ref == "public" else {"ATLAS_SPEED_OFF": ref[4:]} if ref.startswith(
        "off:") else {}


def refs(args) -> list[str]:
    """--baseline ref=A;B;…: the versions to compare this one with (a ref is COMMIT, DIR, public or off:A,B)."""
    return args.baseline.partition("=")[2].split(";")


def record(args, name: str, data: dict) -> None:
    write_results(name, {"benchmark": "pages", "model": args.model} | data)


def after_warmup(act, n: int) -> list:
    return [act(i) for i in range(n + 1)][1:]  # act(0) is a warm-up


def walk_app(bs, page, cfg: dict, args) -> dict:
    """On one page showing Attention: new sentences, layer/head and kind changes, page switches (seconds each)."""
    texts = distinct_sentences(args.repeats + 1)
    out = {"new_sentence": after_warmup(lambda i: walk.new_sentence(bs, page, texts[i], gen=i + 1), args.repeats)}
    layers, heads = cfg["n_decoder_layers"], cfg["n_heads"]  # the view opens on cross-attention
    now = {k: int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head")}

    def layer_or_head(i: int) -> tuple[str, float]:
        key = "head" if i % 2 == 0 or layers == 1 else "layer"
        now[key] = now[key] % (heads if key == "head" else layers) + 1
        return key, walk.change_layer_or_head(bs, page, key, now[key], now["layer"], now["head"], gen=1000 + i)

    n = -1 if args.opus_size else args.repeats  # the opus-mt-size walk keeps its layer, head and kind
    changes = after_warmup(layer_or_head, n)
    kinds = after_warmup(lambda i: walk.change_kind(bs, page, gen=2000 + i), n)
    out |= {"layer_head": [s for _, s in changes], "changed": [k for k, _ in changes],
            "attention_kind": [s for s, _ in kinds], "kind_to": [k for _, k in kinds]}
    views, start = walk.views_of(bs, page), bs.selected_view(page)
    expect = {view: walk.settle_view(bs, page, view) for view in walk.view_cycles(views, start, 1)}
    order = walk.view_cycles(views, start, args.page_cycles or args.repeats)
    out["page_switch"] = [walk.page_switch(bs, page, v, gen=3000 + i, expect=expect[v]) for i, v in enumerate(order)]
    return out | {"to": order, "expect": expect, "views": views}


def app_main(args, bs, ckpt_dir: Path, env: dict) -> int:
    from playwright.sync_api import sync_playwright

    colds, server = [], None
    with tempfile.TemporaryDirectory(prefix="bench_pages_") as tmp, sync_playwright() as p:
        chromium = bs.launch_chromium(p)  # launched first: the cold start is the server's, not the browser's
        try:
            for i in range(max(args.cold_repeats, 1)):
                if server is not None:
                    bs.stop_server(server)
                cold, server = walk.cold_start(bs, chromium, ckpt_dir, args.model, env, Path(tmp) / f"server{i}.log")
                colds.append(cold)
                print(f"cold start {i + 1}: {cold['total_s']:.2f} s", flush=True)
            page = walk.open_drawn(bs, chromium, server.link(view="Attention", **(OPUS_LINK if args.opus_size else {})),
                                   300_000)
            page.evaluate(walk.INPUT_CLOCK_JS)
            got = walk_app(bs, page, walk.checkpoint_config(ckpt_dir / args.model), args)
            exceptions = page.locator(bs.EXCEPTION).count()
        finally:
            if server is not None:
                bs.stop_server(server)
            chromium.close()
    res = {"cold_start": {"runs": colds, **summary([c["total_s"] for c in colds])}}
    for k in ("new_sentence", "layer_head", "attention_kind", "page_switch"):
        res[k] = {"seconds": got[k], **(summary(got[k]) if got[k] else {})}
    res["layer_head"]["changed"], res["attention_kind"]["to"] = got["changed"], got["kind_to"]
    res["page_switch"] |= {"to": got["to"], "views": {v: {"expect": got["expect"][v], **summary(
        [s for s, w in zip(got["page_switch"], got["to"]) if w == v])} for v in got["views"]}}
    rows = [[k.replace("_", " "), res[k]["n"], res[k]["median_ms"], res[k]["p10_ms"], res[k]["p90_ms"]]
            for k in ("cold_start", "new_sentence", "layer_head", "attention_kind", "page_switch") if "n" in res[k]]
    rows += [[f"  to {v}", d["n"], d["median_ms"], d["p10_ms"], d["p90_ms"]]
             for v, d in res["page_switch"]["views"].items()]
    print(table(rows, ["measure", "n", "median ms", "p10", "p90"]))
    worst = max(d["median_ms"] for d in res["page_switch"]["views"].values()) / 1000
    checks = {k: verdict(res[m]["median_ms"] / 1000, TARGETS[k]) for k, m in (
        ("cold_start_s", "cold_start"), ("new_sentence_s", "new_sentence"), ("layer_head_s", "layer_head"))
        if "n" in res[m]} | {"page_switch_s": verdict(worst, TARGETS["page_switch_s"])}
    print(f"targets {TARGETS}: {checks}" + (f"; {exceptions} exception box(es) seen" if exceptions else ""))
    record(args, args.results or "app", {
        "opus_size": args.opus_size, "repeats": args.repeats, **res,
        "torch_threads": args.torch_threads or 1, "exceptions_seen": exceptions, "targets": TARGETS, "checks": checks})
    return 0


def floor_walk(bs, playwright, script: str, ckpt_dir: Path, env: dict, sentence: str, log: Path, args) -> dict:
    """One walk on a fresh server and browser: cold start, learn every view, new sentence, first visits."""
    t0 = time.perf_counter()
    chromium = bs.launch_chromium(playwright)
    server = None
    try:
        page = bs.new_page(chromium, timeout=120_000)
        if args.profile:
            page.context.add_init_script(walk.PRESS_MARK_JS)
        server = bs.start_server(ckpt_dir, args.model, log, timeout=120, extra_env=env, script=script)
        bs.open_app(page, server.link(view="Overview", **({"max_len": 20} if args.opus_size else {})), 120_000)
        bs.wait_charts(page, timeout=120_000)
        page.wait_for_function(walk.NOTHING_LOADING_JS, polling="raf", timeout=120_000)  # no element waits for its code
        cold = time.perf_counter() - t0
        if args.cold_only:
            return {"cold_start": cold, "exceptions": page.locator(bs.EXCEPTION).count()}
        page.evaluate(walk.INPUT_CLOCK_JS)
        bs.widget(page, "view").locator("[data-testid='stRadioOption']").first.wait_for(timeout=60_000)
        views = [v for v in walk.views_of(bs, page) if v not in args.skip_views]
        expect = {view: walk.settle_view(bs, page, view) for view in views[1:] + views[:1]}
        walk.settle_view(bs, page, "Attention")
        sentence_s = walk.new_sentence(bs, page, sentence, gen=1)
        if args.profile:
            time.sleep(1.0)  # what the new sentence started in the background ends, as while a student reads
        first = {}
        for i, view in enumerate(v for v in views if v != "Attention"):
            if args.profile and view in (args.views or views):
                first[view] = walk.traced_switch(bs, chromium, page, view, 10 + i, expect[view], args.save_traces)
            else:
                first[view] = walk.page_switch(bs, page, view, gen=10 + i, expect=expect[view])
        exceptions = page.locator(bs.EXCEPTION).count()
    finally:
        if server is not None:
            bs.stop_server(server)
        chromium.close()
    total = {} if args.profile else {"first_visits": sum(first.values())}  # a walk's sum: steadier than one page's
    return {"cold_start": cold, "new_sentence": sentence_s, "first_visit": first, "exceptions": exceptions} | total


def medians(walks: list[dict], views: set | None = None) -> dict:
    """Median per measure over walks (per view for the first visits; per view and measure when profiled); `views`:
    only those (the views every variant has: an older version may lack a page), their first visits summed anew."""
    out = {k: statistics.median(w[k] for w in walks) for k in ("cold_start", "new_sentence", "first_visits")
           if k in walks[0]}
    if views is not None and "first_visits" in out:
        out["first_visits"] = statistics.median(sum(w["first_visit"][v] for v in views) for w in walks)
    for view, got in walks[0].get("first_visit", {}).items():
        if views is not None and view not in views:
            continue
        values = [w["first_visit"][view] for w in walks]
        out.setdefault("first_visit", {})[view] = statistics.median(values) if not isinstance(got, dict) else {
            k: statistics.median(v[k] for v in values if v[k] is not None) for k in got if got[k] is not None}
    return out


def floor_main(args, bs, ckpt_dir: Path, env: dict, stack: contextlib.ExitStack) -> int:
    from playwright.sync_api import sync_playwright

    bases = refs(args) if (args.baseline or "").startswith("ref=") else ["floor"]
    scripts = {b: str(ROOT / "benchmarks" / "floor_app.py") if b == "floor" else served(b, args, stack) for b in bases}
    scripts["app"] = served(args.app, args, stack)
    envs = {name: env | ref_env(name) for name in scripts}
    sentences = distinct_sentences(len(scripts) * args.walks)
    walks: dict[str, list] = {name: [] for name in scripts}
    with tempfile.TemporaryDirectory(prefix="bench_pages_") as tmp, sync_playwright() as p:
        for i in range(args.walks):
            for j, (name, script) in list(enumerate(scripts.items()))[:: 1 if i % 2 == 0 else -1]:  # order reversed
                w = floor_walk(bs, p, script, ckpt_dir, envs[name], sentences[len(walks) * i + j],
                               Path(tmp) / f"walk{i}-{j}.log", args)
                walks[name].append(w)
                print(f"walk {i + 1} {name}: cold {w['cold_start']:.2f} s" + ("" if args.cold_only else
                      f", new sentence {w['new_sentence']:.2f} s"), flush=True)
    views = [set(ws[0].get("first_visit", {})) for ws in walks.values()]
    shared = set.intersection(*views) if views and any(v != views[0] for v in views) else None
    got = {name: medians(ws, shared) for name, ws in walks.items()}
    keys = [("cold_start", "cold start", None), ("new_sentence", "new sentence", None),
            ("first_visits", "first visits, summed", None)] + [
        ("first_visit", f"first visit: {v}", v) for v in got["app"].get("first_visit", {})]
    rows = [{"measure": m, "key": k, **({"view": v} if v else {}), "app": got["app"][k] if v is None else
             got["app"][k][v], **{b: got[b][k] if v is None else got[b][k][v] for b in bases}}
            for k, m, v in keys if k in got["app"]]
    if args.profile:
        cols = ["total_ms", "last_frame_ms", "kb_in", "script_ms", "style+layout_ms", "forced layout_ms", "paint_ms",
                "idle_ms"]
        print(table([[r["view"], name] + [f"{r[name].get(c, float('nan')):.0f}" for c in cols] for r in rows
                     if isinstance(r.get("app"), dict) for name in scripts], ["view", "variant"] + cols))
    else:
        for r in rows:  # against a floor: the targets; against another version: no more than 5 % slower
            r |= {"ratio": {b: r["app"] / r[b] for b in bases},
                  "limit": FLOOR_TARGETS[r["key"]] if bases == ["floor"] else REF_LIMIT}
        print(table([[r["measure"], f"{r['app']:.2f}"] + [f"{r[b]:.2f} ({r['ratio'][b]:.2f})" for b in bases] + [
            f"<= {r['limit']}", verdict(max(r["ratio"].values()), r["limit"])] for r in rows],
            ["measure (median of walks)", "app s"] + [f"{b} s (app/{b})" for b in bases] + ["target", ""]))
    name = args.results or ("profile" if args.profile else "floor_cold" if args.cold_only else "floor")
    record(args, name, {
        "walks": args.walks, "variants": {n: "floor" if n == "floor" else checkout_name(Path(s).parent) + f" ({n})" * (
            envs[n] != env) for n, s in scripts.items()},
        "bytecode": "from source" if args.from_source else "compiled first", "rows": rows, "runs": walks,
        "targets": FLOOR_TARGETS, "exceptions_seen": sum(w["exceptions"] for ws in walks.values() for w in ws)})
    return 0


def ab_act(bs, page, action: str, expect: dict, gen: int, sentence: str, step: int) -> float:
    """One timed action on a page that shows the Overview; it shows the Overview again afterwards."""
    if action.startswith("switch:"):
        view = action.split(":", 1)[1]
        seconds = walk.page_switch(bs, page, view, gen=gen, expect=expect[view])
    else:
        walk.settle_view(bs, page, "Attention")
        if action == "sentence":
            seconds = walk.new_sentence(bs, page, sentence, gen=gen)
        else:
            layer, head = (int(bs.selectbox_value(page, k).split()[-1]) for k in ("layer", "head"))
            key = "head" if step % 2 == 0 else "layer"  # between 1 and 2: a model of two layers and heads or more
            value = (head if key == "head" else layer) % 2 + 1
            layer, head = (layer, value) if key == "head" else (value, head)
            seconds = walk.change_layer_or_head(bs, page, key, value, layer, head, gen=gen)
    time.sleep(PAUSE_S)
    walk.settle_view(bs, page, "Overview")
    return seconds


def ab_open(bs, browser, script: str, ckpt_dir: Path, model: str, env: dict, log: Path, ref: str = ""):
    """(server, page, what each view holds): a server whose first session came and went (as a cold start's), and a
    session that has seen every view."""
    server = bs.start_server(ckpt_dir, model, log, timeout=120, extra_env=env, script=script)
    walk.open_drawn(bs, browser, server.url).context.close()
    params = dict(kv.split("=", 1) for kv in ref[4:].split(",")) if ref.startswith("url:") else {}
    page = walk.open_drawn(bs, browser, server.link(view="Overview", **params))
    page.evaluate(walk.INPUT_CLOCK_JS)
    return server, page, {view: walk.settle_view(bs, page, view) for view in walk.views_of(bs, page)[1:] + ["Overview"]}


def ab_main(args, bs, ckpt_dir: Path, env: dict, stack: contextlib.ExitStack) -> int:
    from playwright.sync_api import sync_playwright

    this = str(ROOT / "app.py")
    scripts = {ref: served(ref, args, stack) for ref in refs(args)} | {"this": this, "again": this}
    envs = {name: env | ref_env(name) for name in scripts}
    sentences = distinct_sentences(args.repeats + 1)
    seconds = {(name, a): [] for name in scripts for a in args.actions}
    opened = {}
    with tempfile.TemporaryDirectory(prefix="bench_pages_") as tmp, sync_playwright() as p:
        browser = bs.launch_chromium(p)
        try:
            for name, script in scripts.items():
                log = Path(tmp) / f"server{len(opened)}.log"
                opened[name] = ab_open(bs, browser, script, ckpt_dir, args.model, envs[name], log, name)
            gen = 100
            for i in range(args.repeats):
                for action in args.actions:
                    for name in list(scripts)[:: 1 if i % 2 == 0 else -1]:
                        _, page, expect = opened[name]
                        page.bring_to_front()
                        gen += 10
                        seconds[(name, action)].append(ab_act(bs, page, action, expect, gen, sentences[i], i))
                print(f"repeat {i + 1} of {args.repeats} done", flush=True)
        finally:
            for server, _, _ in opened.values():
                bs.stop_server(server)
            browser.close()
    print(table([[a, n, f"{statistics.median(s) * 1000:.0f}", f"{statistics.mean(s) * 1000:.0f}",
                  f"{min(s) * 1000:.0f}", len(s)] for (n, a), s in sorted(
                      seconds.items(), key=lambda kv: (args.actions.index(kv[0][1]), list(scripts).index(kv[0][0])))],
                ["action", "variant", "median ms", "mean ms", "min ms", "n"]))
    variants = {n: checkout_name(Path(s).parent) + f" ({n})" * (envs[n] != env or n.startswith("url:"))
                for n, s in scripts.items()}
    record(args, args.results or "ab", {"variants": variants, "actions": args.actions, "repeats": args.repeats,
                                        "seconds": {f"{n} | {a}": v for (n, a), v in seconds.items()}})
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_server_args(ap)
    ap.add_argument("--baseline", help="floor, or ref=REF[;REF…] (REF: COMMIT, DIR, public: this one with every "
                    "private-name device off, off:A,B: this one with those speed devices off, url:K=V,…: this one "
                    "opened with those URL parameters)")
    ap.add_argument("--profile", action="store_true", help="trace each first visit of a floor walk in Chromium")
    ap.add_argument("--repeats", type=int, default=None, help="actions of each kind (app: 10; side by side: 12)")
    ap.add_argument("--cold-repeats", type=int, default=3, help="cold starts of the app alone")
    ap.add_argument("--page-cycles", type=int, default=None, help="rotations through every view (default --repeats)")
    ap.add_argument("--opus-size", action="store_true", help="--shape opus-mt-de-en")
    ap.add_argument("--shape", choices=shapes.SHAPES, help="serve a published shape with random weights (shapes.py)")
    ap.add_argument("--walks", type=int, default=None, help="walks of each variant (--baseline floor: 3, --profile: 1)")
    ap.add_argument("--cold-only", action="store_true", help="walks stop after their cold start")
    ap.add_argument("--skip-views", nargs="*", default=["What if"], help="views the walks leave out")
    ap.add_argument("--app", default=".", help="the checkout that is the app in a walk (COMMIT or DIR)")
    ap.add_argument("--actions", nargs="+", default=["switch:Masks", "switch:Embeddings", "sentence", "layer-head"])
    ap.add_argument("--views", nargs="+", default=None, help="first visits to trace (default: every one)")
    ap.add_argument("--save-traces", type=Path, default=None, help="write each traced first visit here")
    ap.add_argument("--results", default=None, help="result file name in benchmarks/results/")
    args = ap.parse_args()
    if args.baseline and args.baseline != "floor" and not args.baseline.startswith("ref="):
        ap.error("--baseline is floor or ref=COMMIT|DIR|public")
    args.shape = args.shape or ("opus-mt-de-en" if args.opus_size else None)
    args.opus_size = bool(args.shape)
    args.walks_given = args.walks is not None  # against a ref: floor walks (cold start, first visits), not side by side
    args.repeats, args.walks = args.repeats or (12 if args.baseline else 10), args.walks or (1 if args.profile else 3)
    with contextlib.ExitStack() as stack:
        if args.shape:  # random weights never end a translation: the app's links cap it at 20 tokens
            args.checkpoint_dir, args.model = stack.enter_context(tempfile.TemporaryDirectory()), args.shape
            shapes.build_shape(Path(args.checkpoint_dir) / args.model, args.shape)
        if (ready := common.server_preflight(args)) is None:
            return 2
        bs, ckpt_dir, env = ready
        if args.profile or args.baseline == "floor" or args.walks_given:
            return floor_main(args, bs, ckpt_dir, env, stack)
        if args.baseline:
            return ab_main(args, bs, ckpt_dir, env, stack)
        return app_main(args, bs, ckpt_dir, env)


if __name__ == "__main__":
    sys.exit(main())
