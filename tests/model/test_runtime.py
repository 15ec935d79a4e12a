"""The app's process-wide thread settings (model.inference.runtime), checked in a fresh interpreter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, numpy, torch
from threadpoolctl import threadpool_info
before = {p["internal_api"]: p["num_threads"] for p in threadpool_info()}
import views.plumbing.state
views.plumbing.state._service()  # what loading a model does first: it applies ATLAS_TORCH_THREADS
after = {p["internal_api"]: p["num_threads"] for p in threadpool_info()}
print(json.dumps({"before": before, "after": after, "torch": torch.get_num_threads()}))
"""


def probe(threads: str | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATLAS_TORCH_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    if threads is not None:
        env["ATLAS_TORCH_THREADS"] = threads
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_app_runs_one_blas_thread_per_request_like_torch():
    """NumPy's OpenBLAS would start a thread per core whose idle spinning the server pays for after every call."""
    got = probe(None)
    assert got["torch"] == 1
    assert got["after"]["openblas"] == 1
    if (os.cpu_count() or 1) > 1:
        assert got["before"]["openblas"] > 1  # without the setting there would be more: the check means something
    assert probe("2")["after"]["openblas"] == min(2, got["before"]["openblas"])
