"""What NumPy's idle BLAS threads cost: the Embeddings page's nearest-neighbour table with one and with every core.

    python benchmarks/bench_blas_spin.py [--checkpoint checkpoints/multi30k-de-en] [--repeats 10] [--tail-ms 500]

Builds the nearest-neighbour table of a sentence's tokens (viz.embeddings.nearest_neighbours over the model's source
embedding matrix, as views/embeddings.py does) with OpenBLAS limited to one thread (the app's setting,
model/runtime.use_threads) and to one per core (NumPy's default), alternating. For each build it reads the wall time
of the call and this process's CPU time (getrusage: all threads) from the call's start until --tail-ms after it
ended: the CPU that OpenBLAS's idle threads spend spinning after a call is counted, as bench_server_cpu.py counts it
for the server. Medians of --repeats. Writes benchmarks/results/blas_spin.json.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

from common import ROOT, machine, open_translator, table, write_results


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en"))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--tail-ms", type=float, default=500.0)
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    from viz.embeddings import nearest_neighbours

    translator = open_translator(args.checkpoint, threads=1)
    if translator is None:
        return 2
    lut, itos = translator.embedding_matrix("src")  # (V, d), as views/state.vocab_embeddings gives the page
    ids = list(range(10, 22))  # twelve entries, a sentence's worth
    cores = os.cpu_count() or 1
    runs: dict[int, dict[str, list[float]]] = {1: {"wall": [], "cpu": []}, cores: {"wall": [], "cpu": []}}
    for _ in range(args.repeats + 1):  # the first round warms up
        for n in runs:
            with threadpool_limits(limits=n, user_api="blas"):
                time.sleep(args.tail_ms / 1000)  # whatever spun before has stopped
                c0, t0 = cpu_s(), time.perf_counter()
                nearest_neighbours(lut, itos, ids, k=5, exclude_idx=())
                wall = time.perf_counter() - t0
                time.sleep(args.tail_ms / 1000)
                runs[n]["wall"].append(wall)
                runs[n]["cpu"].append(cpu_s() - c0)
    out = {n: {"wall_ms": 1000 * statistics.median(r["wall"][1:]), "cpu_ms": 1000 * statistics.median(r["cpu"][1:])}
           for n, r in runs.items()}
    print(f"nearest-neighbour table over {lut.shape[0]:,} × {lut.shape[1]} embeddings, {len(ids)} entries; "
          f"{args.repeats} repeats, CPU counted until {args.tail_ms:.0f} ms after each call")
    print(table([[f"{n} BLAS thread(s)", v["wall_ms"], v["cpu_ms"]] for n, v in out.items()],
                ["OpenBLAS", "wall ms", "CPU ms (with the tail)"]))
    path = write_results("blas_spin", {"benchmark": "blas_spin", "checkpoint": args.checkpoint, "cores": cores,
                                       "repeats": args.repeats, "tail_ms": args.tail_ms, "machine": machine(),
                                       "threads": {str(n): v for n, v in out.items()}})
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
