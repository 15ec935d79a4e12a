"""The house's budgets (../shared/STYLE.md, "The house we are moving to"), kept by a test so the next feature keeps
them: benchmarks at most 12 scripts and 3,000 lines, docs/performance.md at most 250 lines and the README 300, every
module at most 400 lines and every function of the app at most 80."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = ["app.py", "views", "viz", "model", "atlas", "deploy", "benchmarks"]  # the app's code, its benchmarks included
MAX_BENCHMARK_SCRIPTS = 12  # every .py file under benchmarks/, its helpers included
MAX_BENCHMARK_LINES = 3000
MAX_DOC_LINES = {"docs/performance.md": 250, "README.md": 300}
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80  # from `def` to its last line, decorators not counted


def python_files(*roots: str) -> list[Path]:
    """The .py files of these files and folders (bytecode caches left out), in order."""
    out = []
    for root in roots:
        path = ROOT / root
        out += [path] if path.is_file() else sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
    return out


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def test_the_benchmarks_stay_within_12_scripts_and_3000_lines():
    scripts = python_files("benchmarks")
    total = sum(lines(p) for p in scripts)
    assert len(scripts) <= MAX_BENCHMARK_SCRIPTS, (
        f"benchmarks/ holds {len(scripts)} .py files, over its budget of {MAX_BENCHMARK_SCRIPTS} "
        f"({', '.join(p.name for p in scripts)}): fold a script into a related one as a sub-command")
    assert total <= MAX_BENCHMARK_LINES, (
        f"benchmarks/ holds {total:,} lines of Python, over its budget of {MAX_BENCHMARK_LINES:,} ("
        + ", ".join(f"{p.name} {lines(p)}" for p in scripts) + "): merge, trim, or share code through common.py")


@pytest.mark.parametrize("doc", sorted(MAX_DOC_LINES))
def test_a_doc_stays_within_its_lines(doc):
    n, limit = lines(ROOT / doc), MAX_DOC_LINES[doc]
    assert n <= limit, f"{doc} has {n} lines, over its budget of {limit}: shorten it (the current state, not a diary)"


def test_every_module_stays_within_400_lines():
    over = {shown(p): n for p in python_files(*APP, "tests") if (n := lines(p)) > MAX_FILE_LINES}
    assert not over, f"modules over the budget of {MAX_FILE_LINES} lines (split them by concern): {over}"


def long_functions(path: Path) -> dict[str, int]:
    """{"file:line name": lines} of every function and method of `path` over MAX_FUNCTION_LINES."""
    out = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1  # lineno is the `def` line: decorators are not counted
            if n > MAX_FUNCTION_LINES:
                out[f"{shown(path)}:{node.lineno} {node.name}"] = n
    return out


def test_every_function_of_the_app_stays_within_80_lines():
    over = {k: n for p in python_files(*APP) for k, n in long_functions(p).items()}
    assert not over, (f"functions over the budget of {MAX_FUNCTION_LINES} lines (split them into well-named "
                      f"helpers): {over}")


def test_the_function_budget_counts_from_def_to_the_last_line(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    path = tmp_path / "m.py"
    path.write_text(f"@staticmethod\ndef fits():\n{body}\n\n\ndef over():\n{body}\n    y = 0\n", encoding="utf-8")
    # fits: its `def` and MAX - 1 lines (with its decorator one more); over: one line more
    assert long_functions(path) == {f"m.py:{MAX_FUNCTION_LINES + 4} over": MAX_FUNCTION_LINES + 1}
