"""Shared by the benchmark scripts: paths, German test sentences, statistics, result files."""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import platform
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TICKS = os.sysconf("SC_CLK_TCK")  # /proc counts CPU time in clock ticks
for p in (ROOT, ROOT / "tests", ROOT / "deploy"):  # the model package, tests/browser_support.py, deploy/serve.py
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
    """Median, p10, p90, p95, min, max in milliseconds."""
    ms = sorted(x * 1000 for x in seconds)
    q = statistics.quantiles(ms, n=20, method="inclusive") if len(ms) > 1 else [ms[0]] * 19
    return {"n": len(ms), "median_ms": statistics.median(ms), "p10_ms": q[1], "p90_ms": q[17], "p95_ms": q[18],
            "min_ms": ms[0], "max_ms": ms[-1]}


def own_cpu_seconds() -> float:
    """This process's CPU seconds, user + system."""
    return sum(resource.getrusage(resource.RUSAGE_SELF)[:2])


def machine() -> dict:
    """What the numbers were measured on, including the load (a busy machine makes everything slower)."""
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    with contextlib.suppress(OSError):
        info["loadavg_1_5_15"] = os.getloadavg()
    return info


def verdict(value: float, limit: float) -> str:
    return "ok" if value <= limit else "MISSED"


def shown_path(path) -> str:
    """A path as a result file records it: relative to the repository when inside it (a result names no machine's
    folder), else as given."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


def write_results(name: str, data: dict) -> Path:
    """Write benchmarks/results/NAME.json with the machine it was measured on and the command (unless `data` says
    otherwise), and say so."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = {"machine": machine(), "command": " ".join(["python", shown_path(sys.argv[0]), *sys.argv[1:]])} | data
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {shown_path(path)}")
    return path


def table(rows: list[list], header: list[str]) -> str:
    """A plain fixed-width text table."""
    cells = [[str(c) for c in header]] + [[f"{c:.1f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_checks(checks: list[tuple]) -> list[dict]:
    """Print the (target, measured, limit, verdict) rows as a table; the rows as a result file records them."""
    print("\n" + table([list(c) for c in checks], ["target", "measured", "limit", ""]))
    return [dict(zip(["target", "measured", "limit", "verdict"], c)) for c in checks]


def add_server_args(ap) -> None:
    """Arguments shared by the browser benchmarks: which checkpoint the server loads, and its threads."""
    ap.add_argument("--checkpoint-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--model", default="multi30k-de-en")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch threads per request in the server (ATLAS_TORCH_THREADS; the app's default is 1)")
    ap.add_argument("--from-source", action="store_true", help="start servers without compiling the checkout first "
                    "(with PYTHONDONTWRITEBYTECODE every start then compiles, as only a deployment's first does)")


def compile_checkout(root: Path = ROOT) -> bool:
    """Write the checkout's bytecode (__pycache__), as a server has it after its first start: where
    PYTHONDONTWRITEBYTECODE is set, every start would otherwise compile some 300 modules from source."""
    import compileall

    folders = [root / name for name in ("model", "views", "viz", "benchmarks")]
    done = [compileall.compile_dir(f, quiet=1) for f in folders]
    return all(done) and bool(compileall.compile_file(root / "app.py", quiet=1))


def checkout_name(root: Path) -> str:
    """How a result file names the served checkout: "." for this one, else its commit (a result names no folder)."""
    if root.resolve() == ROOT:
        return "."
    run = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"another checkout, at commit {run.stdout.strip()}" if run.returncode == 0 else "another checkout"


def checkout(ref: str, stack: contextlib.ExitStack) -> Path:
    """The folder of `ref`: a folder as it is ("." is this checkout), or a commit checked out into a temporary git
    worktree that `stack` removes again."""
    folder = Path(ref) if Path(ref).is_absolute() else ROOT / ref
    if folder.is_dir():
        return folder.resolve()
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="atlas-ref-"))) / "tree"
    run = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tmp), ref],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{ref!r} is neither a folder nor a commit git knows: {run.stderr.strip()}")
    stack.callback(subprocess.run, ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp)],
                   capture_output=True)
    return tmp


def variants(specs: list[str], stack: contextlib.ExitStack) -> dict[str, Path]:
    """NAME=DIR|COMMIT pairs -> {NAME: folder}, in order (a name may appear once)."""
    out: dict[str, Path] = {}
    for spec in specs:
        name, sep, ref = spec.partition("=")
        if not sep or not name or name in out:
            raise SystemExit(f"variants are NAME=DIR or NAME=COMMIT, each name once; got {spec!r}")
        out[name] = checkout(ref or ".", stack)
    return out


def child_json(cmd: list[str], root: Path = ROOT) -> dict:
    """Run a worker process in checkout `root` (with its own `model` package only); the JSON of its last line."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing but the checkout's own folder
    run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        raise SystemExit(f"the worker process {' '.join(cmd[1:4])} failed (exit {run.returncode})")
    return json.loads(run.stdout.strip().splitlines()[-1])


def descendants(pid: int) -> list[int]:
    """pid and every process below it (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def cpu_seconds(pid: int, main_thread: bool = False) -> float:
    """CPU seconds (user + system) used so far by pid with all its threads, and by its children (live and reaped);
    `main_thread`: by its main thread alone (in Streamlit the event loop; each script run has a thread of its own)."""
    ticks = 0
    for stat in [f"/proc/{pid}/task/{pid}/stat"] if main_thread else [f"/proc/{p}/stat" for p in descendants(pid)]:
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        ticks += sum(int(x) for x in fields[11:13 if main_thread else 15])  # utime, stime (, cutime, cstime)
    return ticks / TICKS


def server_preflight(args, browser: bool = True, nginx: bool = False):
    """(browser_support module, checkpoint folder, server env), or None after saying what is missing: the checkpoint,
    Chromium (`browser`), nginx (`nginx`)."""
    import browser_support as bs
    from serve import NGINX_MISSING, nginx_binary

    ckpt_dir = Path(args.checkpoint_dir).resolve()
    missing = (f"No checkpoint at {ckpt_dir / args.model} (model.safetensors missing)."
               if not (ckpt_dir / args.model / "model.safetensors").is_file() else browser and bs.chromium_missing()
               or (NGINX_MISSING if nginx and nginx_binary() is None else None))
    if missing:
        print(missing, file=sys.stderr)
        return None
    if not getattr(args, "from_source", False) and not compile_checkout():
        print("compiling the checkout's Python files failed (see above)", file=sys.stderr)
        return None
    env = {"ATLAS_TORCH_THREADS": str(args.torch_threads)} if args.torch_threads else {}
    return bs, ckpt_dir, env


@contextlib.contextmanager
def serving(processes: int, ckpt_dir: Path, model: str, folder: Path, env: dict):
    """Fresh app servers, stopped afterwards: one `streamlit run app.py` connected to directly (processes=1), or that
    many behind deploy/serve.py's nginx. Yields its url, pids ({name: pid}), names (the backends', or [None]),
    deployment (or None), start_s (until healthy) and dead() (what exited, in words)."""
    import browser_support as bs
    from serve import Deployment

    server = deployment = None
    t0 = time.perf_counter()
    try:
        if processes == 1:
            server = bs.start_server(ckpt_dir, model, folder / "server.log", timeout=120, extra_env=env)
            yield SimpleNamespace(url=server.url, pids={"streamlit_0": server.proc.pid}, names=[None], deployment=None,
                                  start_s=time.perf_counter() - t0, dead=lambda: [] if server.proc.poll() is None
                                  else [f"streamlit exited with {server.proc.returncode}"])
        else:
            threads = int(env.get("ATLAS_TORCH_THREADS", 1))
            deployment = Deployment(processes, checkpoint_dir=ckpt_dir, model=model, torch_threads=threads,
                                    workdir=folder / "serve").start()
            yield SimpleNamespace(url=deployment.url, names=[b.name for b in deployment.backends],
                                  pids={f"streamlit_{b.index}": b.proc.pid for b in deployment.backends}
                                  | {"nginx": deployment.nginx.pid}, deployment=deployment,
                                  start_s=time.perf_counter() - t0, dead=deployment.dead)
    finally:
        if deployment is not None:
            deployment.stop()
        if server is not None:
            bs.stop_server(server)


async def kill_busiest(deployment, backends_of, at: float, sig: int = signal.SIGKILL) -> tuple[float, str]:
    """At wall-clock time `at`, send `sig` to the deployment's backend that serves the most sessions (backends_of():
    each session's backend name) and wait until it has ended; when the signal went, and to which backend."""
    await asyncio.sleep(max(0.0, at - time.time()))
    names = backends_of()
    victim = max(deployment.backends, key=lambda b: names.count(b.name))
    t = time.time()
    victim.proc.send_signal(sig)
    await asyncio.to_thread(victim.proc.wait, 60)
    return t, victim.name


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


def status_mb(pid: int, key: str = "VmRSS", children: bool = True) -> float:
    """A line of /proc/PID/status in MB (VmRSS: resident now; VmHWM: the peak), of pid (and every process below it)."""
    total_kb = 0
    for p in descendants(pid) if children else [pid]:
        with contextlib.suppress(OSError, StopIteration):  # the process ended meanwhile
            total_kb += next(int(line.split()[1]) for line in Path(f"/proc/{p}/status").read_text().splitlines()
                             if line.startswith(key + ":"))
    return total_kb / 1024
