"""Shared by the benchmark scripts: paths, German test sentences, statistics, result files."""
from __future__ import annotations

import itertools
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
for p in (ROOT, ROOT / "tests"):  # the model package, and tests/browser_support.py for the browser scripts
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# Multi30k-style caption words (image descriptions: people, animals, places, actions).
SUBJECTS = ["Ein Mann", "Eine Frau", "Ein kleines Kind", "Zwei Hunde", "Ein brauner Hund", "Eine Gruppe von Menschen",
            "Ein Junge", "Ein Mädchen", "Drei Männer", "Eine ältere Frau", "Ein junger Mann", "Zwei Kinder",
            "Ein Radfahrer", "Ein Arbeiter", "Eine Musikerin", "Ein schwarzer Hund"]
PLURAL = {"Zwei Hunde", "Drei Männer", "Zwei Kinder"}
VERBS = [("läuft", "laufen"), ("spielt", "spielen"), ("sitzt", "sitzen"), ("steht", "stehen"), ("springt", "springen"),
         ("fährt", "fahren"), ("arbeitet", "arbeiten"), ("schläft", "schlafen"), ("wartet", "warten"),
         ("lacht", "lachen"), ("tanzt", "tanzen"), ("liest", "lesen")]
PLACES = ["im Schnee", "auf der Straße", "im Park", "am Strand", "in einem grünen Raum", "vor einem Gebäude",
          "auf einer Bank", "im hohen Gras", "neben einem Auto", "in der Küche", "auf einem Felsen", "im Wasser"]
EXTRAS = ["mit einem roten Ball", "mit einer Gitarre", "mit einem orangen Spielzeug", "in einem blauen Hemd",
          "mit einem Hut", "mit einem Fahrrad", "mit Kopfhörern", "mit einer Tasche"]


def distinct_sentences(n: int) -> list[str]:
    """n different German caption-like sentences (up to 18,432 before they repeat)."""
    combos = list(itertools.product(SUBJECTS, VERBS, PLACES, EXTRAS))
    if n > len(combos):
        raise ValueError(f"only {len(combos)} distinct sentences available")
    random.Random(0).shuffle(combos)  # fixed order, so every run sees the same sentences
    return [f"{s} {v[s in PLURAL]} {p} {e}." for s, v, p, e in combos[:n]]


def sentence_of_length(n_tokens: int, tokenize) -> str:
    """A German sentence of exactly n_tokens tokens according to `tokenize` (text -> tokens: words, or a
    SentencePiece model's pieces), made of caption clauses joined by commas and cut after a whole word."""
    clauses = [s[:-1] for s in distinct_sentences(64)]  # without the full stop
    for start in range(len(clauses)):  # pieces may skip a count: another stream of clauses then hits it
        stream = clauses[start:] + clauses[:start]
        words = ", ".join(c if i == 0 else c[0].lower() + c[1:] for i, c in enumerate(stream)).split()
        for k in range(1, len(words) + 1):
            text = " ".join(words[:k]).rstrip(",") + "."
            got = len(tokenize(text))
            if got == n_tokens:
                return text
            if got > n_tokens:
                break
    raise RuntimeError(f"no sentence of exactly {n_tokens} tokens could be built")


def summary(seconds: list[float]) -> dict:
    """Median, p10, p90, min, max in milliseconds."""
    ms = sorted(x * 1000 for x in seconds)
    q = statistics.quantiles(ms, n=10, method="inclusive") if len(ms) > 1 else [ms[0]] * 9
    return {"n": len(ms), "median_ms": statistics.median(ms), "p10_ms": q[0], "p90_ms": q[-1],
            "min_ms": ms[0], "max_ms": ms[-1]}


def machine() -> dict:
    """What the numbers were measured on, including the load (a busy machine makes everything slower)."""
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        info["loadavg_1_5_15"] = os.getloadavg()
    except OSError:
        pass
    return info


def verdict(value: float, limit: float) -> str:
    return "ok" if value <= limit else "MISSED"


def shown_path(path) -> str:
    """A path as a result file records it: relative to the repository when inside it (a result names no machine's
    folder), else as given."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


def write_results(name: str, data: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def table(rows: list[list], header: list[str]) -> str:
    """A plain fixed-width text table."""
    cells = [[str(c) for c in header]] + [[f"{c:.1f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_server_args(ap) -> None:
    """Arguments shared by the browser benchmarks: which checkpoint the server loads, and its threads."""
    ap.add_argument("--checkpoint-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch threads per request in the server (ATLAS_TORCH_THREADS; the app's default is 1)")
    ap.add_argument("--from-source", action="store_true",
                    help="start the servers without the checkout's bytecode when the machine keeps Python from "
                         "writing it (PYTHONDONTWRITEBYTECODE): every start then compiles the app's modules, as only "
                         "a deployment's very first start does")


def compile_checkout(root: Path = ROOT) -> bool:
    """Write the bytecode of the checkout's Python files (__pycache__, ignored by git), as a server has it after its
    first start. Python writes it on import by itself, except where PYTHONDONTWRITEBYTECODE is set (as on the
    machine these benchmarks were written on): there every start would compile some 300 modules from source."""
    import compileall

    folders = [root / name for name in ("model", "views", "viz", "benchmarks")]
    done = [compileall.compile_dir(f, quiet=1) for f in folders]
    return all(done) and bool(compileall.compile_file(root / "app.py", quiet=1))


def add_app_root_arg(ap) -> None:
    """--app-root DIR: run another checkout's app.py as the app (read back with :func:`app_script`)."""
    ap.add_argument("--app-root", default=None,
                    help="run another checkout's app.py as the app (e.g. an older commit in a git worktree), "
                         "compiled first like this one")


def app_script(args) -> str | None:
    """The app.py of --app-root's checkout, its bytecode written first (unless --from-source); None, with the
    reason printed, when compiling it failed."""
    root = Path(args.app_root).resolve()
    if not args.from_source and not compile_checkout(root):
        print(f"compiling {root} failed (see above)", file=sys.stderr)
        return None
    return str(root / "app.py")


def checkout_name(root: Path) -> str:
    """How a result file names the served checkout: "." for this one, else its commit (a result names no folder)."""
    if root.resolve() == ROOT:
        return "."
    run = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"another checkout, at commit {run.stdout.strip()}" if run.returncode == 0 else "another checkout"


def server_preflight(args):
    """(browser_support module, checkpoint folder, server env), or None after saying what is missing."""
    import browser_support as bs

    ckpt_dir = Path(args.checkpoint_dir).resolve()
    if not (ckpt_dir / args.model / "model.safetensors").is_file():
        print(f"No checkpoint at {ckpt_dir / args.model} (model.safetensors missing).", file=sys.stderr)
        return None
    missing = bs.chromium_missing()
    if missing:
        print(missing, file=sys.stderr)
        return None
    if not getattr(args, "from_source", False) and not compile_checkout():
        print("compiling the checkout's Python files failed (see above)", file=sys.stderr)
        return None
    env = {"ATLAS_TORCH_THREADS": str(args.torch_threads)} if args.torch_threads else {}
    return bs, ckpt_dir, env


def open_translator(checkpoint, threads: int | None = None, draft: bool | None = None):
    """The Translator of a checkpoint folder (torch threads set first), or None after saying on stderr why not.
    `draft`: as `Translator.from_checkpoint`'s (None: only where it pays, False: never, True: built now)."""
    import torch

    from model.inference.translator import Translator
    from model.io.checkpoint import CheckpointError

    if threads:
        torch.set_num_threads(threads)
    try:
        return Translator.from_checkpoint(checkpoint, draft=draft)
    except CheckpointError as e:
        print(f"No usable checkpoint: {e}", file=sys.stderr)
        return None
