"""How long CI takes: `.ci/run` in a fresh clone of each version, one after the other, the order reversed every
other repeat (docs/performance.md, "The test suite").

    python benchmarks/bench_suite.py --variants before=COMMIT after=HEAD [--repeats 1] [--out NAME]

A clone is made of this repository at the commit (in a temporary folder beside it, so that `../shared` is where
.ci/run's tests look for it), `.ci/run` runs there with its output in a log, and its wall time, exit status and
pytest's summary line are written to benchmarks/results/NAME.json with the machine's load before each run. Run it
on an otherwise idle machine: a run beside it makes the numbers meaningless.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TARGET_S = 14 * 60  # CI on 2 cores


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", nargs="+", default=["after=HEAD"],
                    help="NAME=COMMIT pairs, e.g. before=b184535 after=HEAD")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each variant (default 1)")
    ap.add_argument("--out", default="suite", help="results file name, without .json (default suite)")
    return ap.parse_args(argv)


def one_run(commit: str, log: Path) -> dict:
    """Clone `commit` beside the repository, run .ci/run there; wall seconds, exit status, pytest's last line."""
    sha = subprocess.run(["git", "rev-parse", commit], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    clone = Path(tempfile.mkdtemp(dir=ROOT.parent, prefix="suite-"))  # a sibling: ../shared is beside it
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", sha.strip()], cwd=clone, check=True)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        with open(log, "wb") as out:
            ci = subprocess.run([str(clone / ".ci" / "run")], cwd=clone, stdout=out, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - start
    finally:
        shutil.rmtree(clone, ignore_errors=True)
    lines = [ln for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if " in " in ln and "=" in ln]
    return {"commit": sha.strip()[:12], "seconds": round(seconds, 1), "exit_status": ci.returncode, "load_before": load,
            "summary": lines[-1].strip("= ") if lines else ""}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    variants = dict(v.split("=", 1) for v in args.variants)
    RESULTS.mkdir(parents=True, exist_ok=True)
    runs = []
    for r in range(args.repeats):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            # outside results/: the log names this machine's folders, and results/ is shipped
            log = Path(tempfile.gettempdir()) / f"{args.out}_{name}_{r}.log"
            run = {"variant": name, "repeat": r, **one_run(variants[name], log)}
            if run["exit_status"] == 0:
                log.unlink()  # a failed run's log is kept, to read what failed (its path is printed)
            runs.append(run)
            print(f"{name} ({run['commit']}), repeat {r}: {run['seconds']:.0f} s (target <= {TARGET_S} s), exit status "
                  f"{run['exit_status']}; {run['summary']}" + (f" (its log: {log})" if log.exists() else ""),
                  flush=True)
    result = {"command": "python benchmarks/bench_suite.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                          "python": platform.python_version()},
              "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "target_s": TARGET_S, "runs": runs}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
