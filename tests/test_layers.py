"""The layers stay apart: model/ knows no Streamlit, viz/ neither torch nor Streamlit, views/ and app.py no torch.

Read from the source (AST), so a lazy import inside a function is caught too.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "model": {"streamlit", "plotly", "viz", "views"},
    "viz": {"torch", "streamlit", "model", "views"},
    "views": {"torch"},
}
# The command line `python -m model.export --html` draws the lesson file with viz/lesson.py: the top-level
# command-line file is glue between the two layers and may import viz; the rooms under model/*/ may not.
ALLOWED = {("model/export.py", "viz")}


def imported_modules(path: Path) -> set[str]:
    """Top-level package names of every import statement in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py")) + ([ROOT / "app.py"] if package == "views" else [])


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layers(package):
    bad = {f"{p.relative_to(ROOT)} imports {m}"
           for p in files(package) for m in imported_modules(p) & FORBIDDEN[package]
           if (p.relative_to(ROOT).as_posix(), m) not in ALLOWED}
    assert not bad, sorted(bad)


def test_pages_read_no_module_attributes():
    """Pages get data: no `.model.`, no `.lut`, no vocabularies' id maps, no head-mask tensors in views/ or app.py."""
    patterns = re.compile(r"\.model\.|\.lut\b|\.stoi\b|\.itos\[|\b(tgt|src)_vocab\b|(?<!page)\.prepare\(|head_mask")
    offenders = []
    for p in files("views"):
        if p.name == "state.py":  # the one place that calls the Translator, and returns data
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if patterns.search(line):
                offenders.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders


def test_the_check_catches_a_forbidden_import(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def f():\n    import torch.nn as nn\n    from streamlit import cache_data\n", encoding="utf-8")
    assert {"torch", "streamlit"} <= imported_modules(f)


def test_no_page_draws_a_canvas_grid():
    """Tables are HTML (Markdown; st.table in a text description): an st.dataframe or st.data_editor would make a
    session's first page wait for the grid's 1.3 MB of code."""
    grid = re.compile(r"\.(dataframe|data_editor)\(")
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in files("views")
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if grid.search(line)]
    assert not offenders, offenders


def package_imports(folder: Path) -> dict[str, set[str]]:
    """Which modules of the package `folder` (and its sub-packages) each of its modules imports, at any depth of the
    file, by dotted name (a package's `__init__` under the package's own name)."""
    def dotted(path: Path) -> str:
        parts = path.relative_to(folder.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    files = {dotted(p): p for p in folder.rglob("*.py")}

    def resolved(name: str) -> str:  # the module a dotted name lives in ("views.a.x" -> "views.a")
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    edges = {}
    for m, path in files.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {resolved(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {resolved(f"{node.module}.{a.name}") for a in node.names}
        edges[m] = found - {m, ""}
    return edges


def a_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import cycle as the modules along it ([] when there is none), by depth-first search."""
    done, path = set(), []

    def walk(m: str) -> list[str]:
        if m in path:
            return path[path.index(m):] + [m]
        if m in done:
            return []
        path.append(m)
        for n in sorted(edges[m]):
            if cycle := walk(n):
                return cycle
        path.pop()
        done.add(m)
        return []

    return next((c for m in sorted(edges) if (c := walk(m))), [])


@pytest.mark.parametrize("package", ["views", "viz", "model"])
def test_no_import_cycle_among_a_packages_modules(package):
    """views/: the router imports the pages, so no page imports a module that imports it; viz/ and model/: a module's
    helpers live below it (viz/alt_base.py, model/patch.py's command line)."""
    edges = package_imports(ROOT / package)
    assert sum(map(len, edges.values())) > 10  # the graph is read, not empty
    assert a_cycle(edges) == [], " → ".join(a_cycle(edges))


def test_the_cycle_check_catches_a_cycle(tmp_path):
    folder = tmp_path / "views"
    folder.mkdir()
    (folder / "a.py").write_text("from views import b\n", encoding="utf-8")
    (folder / "b.py").write_text("def f():\n    import views.c\n", encoding="utf-8")
    (folder / "c.py").write_text("from views.a import x\n", encoding="utf-8")
    assert a_cycle(package_imports(folder)) == ["views.a", "views.b", "views.c", "views.a"]
