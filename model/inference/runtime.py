"""Process-wide settings the app sets once, so that views/ never imports torch."""
from __future__ import annotations

import torch
from threadpoolctl import threadpool_limits


def use_threads(n: int) -> None:
    """Torch threads, and NumPy's BLAS threads, for this process: one sentence is small matrix work, so one thread
    per request is as fast as two, and sessions running at once do not fight over the cores.

    NumPy's OpenBLAS starts one thread per core, and after each call its idle threads spin for about a tenth of a
    second before they sleep, so a short NumPy call costs many times its own CPU time with two threads
    (`benchmarks/bench_server_cpu.py --blas` measures it; `bench_server_cpu.py` counts that spinning as the server's).
    Torch's own pools follow set_num_threads; OpenBLAS is limited through threadpoolctl, as it is already loaded by now.
    """
    n = max(1, int(n))
    torch.set_num_threads(n)
    threadpool_limits(limits=n, user_api="blas")


def release_freed_memory() -> None:
    """Hand the memory that threads freed back to the system (glibc's malloc_trim). Each thread allocates from an
    arena of its own, which keeps what is freed; a draft packed by two threads left about 90 MB so for NLLB-600M. A
    no-op where the C library has no malloc_trim (macOS, musl)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
