"""docs/notebooks/tour.ipynb, the researcher's tour of the shipped model, runs top to bottom in a fresh Python kernel.

Its cells assert what they show (shapes, the hand-made knockout equal to off_heads, the logit lens's last layer equal
to the model), so a run without an error is the check. The notebook is committed without outputs: a saved run
(outputs, execution counts) fails here. .ci/run installs nbclient and ipykernel (they are for CI and development
only, not in requirements.txt) and sets ATLAS_CI: there a missing nbclient fails; elsewhere the run is skipped,
saying why.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "notebooks" / "tour.ipynb"
CELL_TIMEOUT_S = 300  # the whole notebook takes well under a minute on 2 cores; this only stops a hung cell


def _code_cells() -> list[dict]:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_committed_without_outputs():
    cells = _code_cells()
    assert cells, f"{NOTEBOOK} has no code cells"
    for i, cell in enumerate(cells):
        assert cell.get("outputs") == [], f"code cell {i} has saved outputs: clear them before committing"
        assert cell.get("execution_count") is None, f"code cell {i} has an execution count: clear outputs"


def _in_ci() -> bool:
    return os.environ.get("ATLAS_CI", "").strip().lower() not in ("", "0", "false", "no")


def _kernel_manager(folder: Path):
    """A kernel of this very interpreter (the one with torch and the project's requirements), whatever kernel named
    "python3" a Jupyter installation on the machine may point at."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = folder / "kernels" / "atlas-tour"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Attention Atlas tour", "language": "python"}), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(spec.parent)])
    return KernelManager(kernel_name="atlas-tour", kernel_spec_manager=specs)


@pytest.mark.checkpoint
@pytest.mark.slow
def test_notebook_runs(tmp_path):
    try:
        import ipykernel  # noqa: F401  (the kernel the notebook runs in)
        import nbformat
        from nbclient import NotebookClient
    except ImportError as e:
        if _in_ci():
            raise  # .ci/run installs them: missing there is a broken CI, not a reason to skip
        pytest.skip(f"{e.name} is not installed: `pip install nbclient ipykernel` to run the notebook "
                    "(CI installs them in .ci/run)")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, km=_kernel_manager(tmp_path), timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": str(ROOT)}})  # the kernel's working directory
    client.execute()  # CellExecutionError, with the cell and its traceback, where a cell fails
    ran = [c for c in nb.cells if c.cell_type == "code"]
    assert ran and all(c.execution_count for c in ran)
    errors = [o for c in ran for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
