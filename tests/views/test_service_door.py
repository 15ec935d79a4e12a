"""The floors hold: pages reach the model only through model/service.py, and records carry no torch.

Each check runs in a fresh interpreter, so a module imported by an earlier test cannot hide an import.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p for p in (ROOT / "views").rglob("*.py") if p.name != "__init__.py")  # every views module

# model.service replaced by a module whose every attribute is a stand-in: importing every page and what app.py
# imports must then load no torch at all.
STUB = """
import sys, types
from unittest import mock
stub = types.ModuleType("model.service")
stub.__getattr__ = lambda name: mock.MagicMock(name=name)
stub.Model = type("Model", (), {})
stub.APP_EXAMPLES = ["Ein Hund läuft."]
import model
sys.modules["model.service"] = stub
model.service = stub
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_records_load_no_torch():
    run = _run("import sys, model.records; print('torch' in sys.modules)")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "False"


def test_every_page_and_app_import_without_torch_when_the_service_is_stubbed():
    pages = ", ".join(".".join(p.relative_to(ROOT).with_suffix("").parts) for p in PAGES)
    # app.py is a script that draws as it runs: its import statements are what it brings into the process
    app = ast.parse((ROOT / "app.py").read_text()).body
    app_imports = [n for n in app if isinstance(n, (ast.Import, ast.ImportFrom))
                   and getattr(n, "module", None) != "__future__"]
    assert len(app_imports) > 5
    code = STUB + f"import {pages}\n" + "\n".join(ast.unparse(n) for n in app_imports) + (
        "\nprint('torch' in sys.modules, 'model.inference.translator' in sys.modules)")
    run = _run(code)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[-2:] == ["False", "False"]


def test_the_real_service_does_load_the_model_code():
    """The check above could pass by importing nothing: without the stub, a page's import does load torch, and so
    does views.plumbing.state's first use of the model (it imports model.service then)."""
    run = _run("import sys, views.pages.attention; print('torch' in sys.modules)")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "True"
    run = _run("import sys, views.plumbing.state; a = 'torch' in sys.modules; views.plumbing.state._service(); "
               "print(a, 'torch' in sys.modules)")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-2:] == ["False", "True"]


def test_app_draws_its_sidebar_before_it_imports_torch():
    """A session's first run sends the sidebar before torch's import (a second or more), so that the browser draws
    it meanwhile: what app.py imports before its first `with st.sidebar:` loads no torch, with the real service."""
    body = ast.parse((ROOT / "app.py").read_text()).body
    first_sidebar = next(i for i, n in enumerate(body) if isinstance(n, ast.With) and "st.sidebar" in ast.unparse(n))
    before = [n for n in body[:first_sidebar] if isinstance(n, (ast.Import, ast.ImportFrom))
              and getattr(n, "module", None) != "__future__"]
    after = [n for n in body[first_sidebar:] if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert len(before) > 5 and after  # the pages come after it
    run = _run("\n".join(ast.unparse(n) for n in before) + "\nimport sys\nprint('torch' in sys.modules)")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[-1] == "False"


def _model_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "model":
            # `from model.analysis import pairs` imports the module model.analysis.pairs
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                names.add(sub if (ROOT / (sub.replace(".", "/") + ".py")).is_file() else node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.split(".")[0] == "model"}
    return names


# model/'s rooms of plain NumPy functions (numbers a page states, the lab's summaries, how a sentence was read, file
# names): a page imports them where it uses them, not through the door, which passes on nothing it does not define.
NUMPY_ROOMS = {"model.analysis.agreement", "model.analysis.experiments", "model.analysis.pairs", "model.text.reading",
               "model.io.export", "model.analysis.links", "model.training.data", "model.training.film_file"}


def test_pages_import_only_the_door_the_records_and_the_numpy_rooms():
    allowed = {"model.service", "model.records"} | NUMPY_ROOMS
    for path in PAGES + [ROOT / "app.py"]:
        extra = _model_imports(path) - allowed
        assert not extra, f"{path.name} imports {sorted(extra)}: ask model/service.py instead"


def test_the_door_passes_on_nothing_it_does_not_define():
    """Every name service.py imports it uses itself (ruff's F401 finds the others): none is kept for pages."""
    assert "noqa: F401" not in (ROOT / "model" / "service.py").read_text()


def test_the_numpy_rooms_load_no_torch():
    run = _run(f"import sys, {', '.join(sorted(NUMPY_ROOMS))}; print('torch' in sys.modules)")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "False"


def test_no_page_names_a_translator_or_a_tensor():
    for path in PAGES + [ROOT / "app.py"]:
        names = {n.id for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
        assert not names & {"Translator", "Tensor", "torch", "nn", "EncoderDecoder"}, path.name


def test_kinds_and_pages_are_defined_once():
    from model import records
    from views.plumbing import state

    assert state.KINDS is records.KINDS and tuple(state.VIEWS) == records.VIEWS
    for path in [*(ROOT / "model").rglob("*.py"), *(ROOT / "views").rglob("*.py"), ROOT / "app.py"]:
        text = path.read_text()
        if path.name != "records.py":
            assert '= ("enc_self", "dec_self", "cross")' not in text, f"{path} defines the kinds again"


def test_the_kept_requests_are_named_as_the_table_says():
    from views.plumbing import state

    for name, kept in state.KEPT.items():
        assert getattr(state, name).__name__ == name, f"state.{name} is not KEPT[{name!r}]'s function"
        assert kept.answer in dir(__import__("model.service", fromlist=["_"])), kept.answer


def test_a_page_asks_with_the_answers_own_arguments_and_a_default_left_out_is_the_same_request(checkpoints):
    """The kept functions take the model's key, then the model.service function's arguments in its order: a call
    naming a default and one leaving it out are one request (one trace, not two), and a wrong argument fails."""
    import inspect

    import pytest

    from model import service
    from views.plumbing import state

    key = state.ModelKey("demo")
    first = state.trace_sentence(key, "Ein Hund läuft.", 0)
    assert state.trace_sentence(key, "Ein Hund läuft.", 0, ()) is first
    assert state.trace_sentence(key, text="Ein Hund läuft.", max_len=0) is first
    assert state.trace_sentence(key, "Ein Hund läuft.", 0, tuple(first.raw_tokens[:1])) is not first
    with pytest.raises(TypeError):
        state.trace_sentence(key, "Ein Hund läuft.", 0, (), "one too many")
    lens = state.logit_lens(key, "Ein Hund läuft.", tuple(first.raw_tokens), 0)
    assert state.logit_lens(key, "Ein Hund läuft.", tuple(first.raw_tokens), 0, 5) is lens
    assert list(inspect.signature(service.logit_lens).parameters)[:5] == ["model", "text", "tgt_tokens", "step", "k"]


def test_the_model_is_asked_through_the_table_only():
    """A page keeps no answer of the model in a cache of its own: a cached function outside state.py that loads a
    model would be a second way to the model, keyed and bounded apart from KEPT."""
    for path in PAGES:
        if path.name == "state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any("cache_" in ast.unparse(d) for d in node.decorator_list):
                called = {ast.unparse(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)}
                assert "load_model" not in called, f"{path.relative_to(ROOT)}: {node.name} keeps the model's answer"
