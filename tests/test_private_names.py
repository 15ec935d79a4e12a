"""Private names of Plotly and Streamlit live in two rooms only, and no Plotly object carries an attribute of ours.

A Plotly or Streamlit upgrade may change any of their private names; viz/plotly_internals.py and
views/plumbing/streamlit_internals.py hold every one the app uses, behind a public fallback
(tests/views/test_internals_contract.py checks them against the installed versions). What a figure needs beside its
data (its text alternative, the note on thinned labels, the figure cache's JSON) is kept in side tables
(`viz.alt.ByFigure`), not in attributes hung on the figure. Read from the source (AST), as tests/test_layers.py does.

The rules, for every module of app.py, views/, viz/, model/ and atlas/ but the two rooms:

1. No import of a private module or name of plotly or streamlit: ``import plotly.io._json``,
   ``from _plotly_utils.utils import x`` (the whole ``_plotly_utils`` package is private),
   ``from plotly.io import _json``, ``from streamlit import _x``.
2. In a module that can hold a Plotly or Streamlit object (every module of app.py, views/ and viz/, and any other
   that imports plotly or streamlit, atlas/show.py), a private name (``_x``; ``__dunder__`` names are public
   protocol) is used only on what is provably ours: ``obj._x`` (read, written or deleted),
   ``getattr/setattr/hasattr/delattr(obj, "_x")`` and a keyword ``_x=`` in a call are allowed where ``obj`` (or
   the function called) is ``self``, ``cls`` or ``super()`` in a class of our own, or a bare name the module binds
   to its own code (a function or class it defines, a module or name it imports from app's packages or a relative
   import). A static check cannot know any other object's type, so any other object counts as possibly Plotly's or
   Streamlit's, a class derived from one of theirs (``class _Prebuilt(go.Figure)``) included.
3. No attribute of our own on a Plotly object. Plotly refuses to set a public attribute it does not know
   (``BaseFigure.__setattr__``, ``BasePlotlyType.__setattr__``), so one of ours would be private: in a module of
   rule 2, no ``obj._x = ...`` (or ``+=``, ``del``), no ``setattr(obj, ...)`` with any name and no write into
   ``obj.__dict__`` or ``vars(obj)`` where ``obj`` is not provably ours; and nowhere in the five packages an
   attribute named ``_atlas...`` (``fig._atlas_alt``, ``getattr(fig, "_atlas_alt")``), the names such attributes
   had. A string such as views/plumbing/urlstate.py's session-state key ``"_atlas_first_"`` is not an attribute.
"""
from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("views", "viz", "model", "atlas")
ROOMS = {"viz/plotly_internals.py", "views/plumbing/streamlit_internals.py"}
FRAMEWORKS = {"plotly", "_plotly_utils", "_plotly_future_", "streamlit"}  # top-level packages of the two
OWN = {"app", *PACKAGES}
ALWAYS_HOLDS_FRAMEWORK_OBJECTS = ("app.py", "views/", "viz/")
NAMED_ACCESS = {"getattr", "setattr", "hasattr", "delattr"}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_files() -> list[Path]:
    return [ROOT / "app.py"] + [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def root_name(node: ast.AST) -> str | None:
    """The name an expression's chain of attributes, calls and subscripts starts from (``go`` of ``go.Figure().x``)."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


class Checker(ast.NodeVisitor):
    """Finds what breaks the rules in one module's source (see the module docstring); ``found``: "line: what"."""

    def __init__(self, source: str, holds_framework_objects: bool = True):
        self.tree = ast.parse(source)
        self.found: list[str] = []
        self.own: set[str] = set()  # names bound to our own code
        self.framework: set[str] = set()  # names bound to plotly or streamlit
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.own.add(node.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    bound = a.asname or top
                    if top in FRAMEWORKS:
                        self.framework.add(bound)
                    elif top in OWN:
                        self.own.add(bound)
            elif isinstance(node, ast.ImportFrom):
                top = (node.module or "").split(".")[0]
                for a in node.names:
                    if node.level == 0 and top in FRAMEWORKS:
                        self.framework.add(a.asname or a.name)
                    elif node.level > 0 or top in OWN:
                        self.own.add(a.asname or a.name)
        self.own -= self.framework  # a name bound both ways counts as theirs
        self.strict = holds_framework_objects or bool(self.framework)
        self.classes: list[bool] = []  # for each enclosing class: whether it is one of ours

    # -- what is ours

    def ours(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            if node.id in ("self", "cls"):
                return bool(self.classes) and self.classes[-1]
            return node.id in self.own
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super":
            return bool(self.classes) and self.classes[-1]
        return False

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        theirs = any(root_name(b) in self.framework for b in node.bases)
        for deco in node.decorator_list:
            self.visit(deco)
        for b in node.bases + [k.value for k in node.keywords]:
            self.visit(b)
        self.classes.append(not theirs)
        for stmt in node.body:
            self.visit(stmt)
        self.classes.pop()

    # -- rule 1: imports

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            parts = a.name.split(".")
            if parts[0] in FRAMEWORKS and any(private(p) for p in parts):
                self.report(node, f"imports the private module {a.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        parts = (node.module or "").split(".")
        if node.level == 0 and parts[0] in FRAMEWORKS:
            if any(private(p) for p in parts):
                self.report(node, f"imports from the private module {node.module}")
            for a in node.names:
                if private(a.name):
                    self.report(node, f"imports the private name {a.name} of {node.module}")

    # -- rules 2 and 3: private names on objects that are not ours, attributes of our own on theirs

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_atlas"):
            self.report(node, f"an attribute of our own: {ast.unparse(node)}")
        elif self.strict and private(node.attr) and not self.ours(node.value):
            what = "sets" if isinstance(node.ctx, (ast.Store, ast.Del)) else "reads"
            self.report(node, f"{what} a private attribute of an object not ours: {ast.unparse(node)}")
        elif (self.strict and node.attr == "__dict__" and isinstance(node.ctx, ast.Load)
              and not self.ours(node.value) and self.writing_into(node)):
            self.report(node, f"writes into the attributes of an object not ours: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in NAMED_ACCESS and len(node.args) >= 2:
            obj, name = node.args[0], node.args[1]
            literal = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
            if literal is not None and literal.startswith("_atlas"):
                self.report(node, f"an attribute of our own: {ast.unparse(node)}")
            elif self.strict and not self.ours(obj):
                if func.id == "setattr":
                    self.report(node, f"sets an attribute on an object not ours: {ast.unparse(node)}")
                elif literal is not None and private(literal):
                    self.report(node, f"uses a private attribute of an object not ours: {ast.unparse(node)}")
        if self.strict and not self.ours(func):
            called = func.value if isinstance(func, ast.Attribute) else func
            if not (isinstance(func, ast.Attribute) and self.ours(called)):
                for k in node.keywords:
                    if k.arg is not None and private(k.arg):
                        self.report(node, f"passes the private keyword {k.arg} to {ast.unparse(func)}")
        self.generic_visit(node)

    def writing_into(self, node: ast.Attribute) -> bool:
        """Whether ``obj.__dict__`` is written into: ``obj.__dict__[k] = v`` or ``obj.__dict__.update(...)``."""
        for parent in ast.walk(self.tree):
            if isinstance(parent, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = parent.targets if isinstance(parent, (ast.Assign, ast.Delete)) else [parent.target]
                if any(isinstance(t, ast.Subscript) and t.value is node for t in targets):
                    return True
            if (isinstance(parent, ast.Attribute) and parent.value is node
                    and parent.attr in ("update", "setdefault", "__setitem__")):
                return True
        return False

    def visit_Subscript(self, node: ast.Subscript) -> None:  # vars(obj)[k] = v
        v = node.value
        if (self.strict and isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(v, ast.Call)
                and isinstance(v.func, ast.Name) and v.func.id == "vars" and v.args and not self.ours(v.args[0])):
            self.report(node, f"writes into the attributes of an object not ours: {ast.unparse(node)}")
        self.generic_visit(node)

    def report(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{node.lineno}: {what}")


def check(source: str, holds_framework_objects: bool = True) -> list[str]:
    checker = Checker(source, holds_framework_objects)
    checker.visit(checker.tree)
    return checker.found


def check_file(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    return [f"{rel}:{line}" for line in check(path.read_text(encoding="utf-8"),
                                              rel.startswith(ALWAYS_HOLDS_FRAMEWORK_OBJECTS))]


@pytest.mark.parametrize("package", ["app.py", *PACKAGES])
def test_private_names_of_plotly_and_streamlit_stay_in_their_two_rooms(package):
    files = [p for p in module_files() if p.relative_to(ROOT).as_posix().split("/")[0] == package]
    assert files, f"no module found in {package}"
    found = [f for p in files if p.relative_to(ROOT).as_posix() not in ROOMS for f in check_file(p)]
    assert not found, ("private Plotly/Streamlit names, or attributes of our own on their objects, outside "
                       f"{sorted(ROOMS)}:\n" + "\n".join(found))


def test_the_two_rooms_exist_and_do_use_private_names():
    """The rooms are where the check says they are (a renamed one would make the exclusion silently stale)."""
    for room in ROOMS:
        assert (ROOT / room).is_file(), room
    assert check_file(ROOT / "viz/plotly_internals.py")  # fig._data, _props, _validate, _plotly_utils


def test_no_attribute_named_atlas_anywhere():
    """Rule 3's names, in every module and the two rooms too; a string key that happens to start so is fine."""
    found = [f for p in module_files() for f in check_file(p) if "_atlas" in f and "attribute of our own" in f]
    assert not found, found


@pytest.mark.parametrize("source, bad", [
    ("fig._data", True),
    ("fig.layout._props", True),
    ("import plotly.graph_objects as go\ngo.Figure(data=[], _validate=False)", True),
    ("from _plotly_utils.utils import to_typed_array_spec", True),
    ("import _plotly_utils.basevalidators", True),
    ("from plotly.io import _json", True),
    ("import plotly.io._json as own", True),
    ("from streamlit.runtime.scriptrunner import _private", True),
    ("import streamlit as st\nst._main", True),
    ("getattr(fig, '_layout', None)", True),
    ("fig._atlas_alt = alt", True),
    ("light._atlas_dict = kept", True),
    ("setattr(fig, '_atlas_alt', alt)", True),
    ("setattr(fig, name, value)", True),
    ("fig.__dict__['alt'] = alt", True),
    ("fig.__dict__.update(alt=alt)", True),
    ("vars(fig)['alt'] = alt", True),
    ("import plotly.graph_objects as go\nclass P(go.Figure):\n    def to_dict(self):\n        return self._kept", True),
    ("import plotly.graph_objects as go\nclass P(go.Figure):\n    def f(self):\n        return super()._x()", True),
    # fine: dunders, our own code, public properties, strings
    ("fig.__class__.__name__", False),
    ("fig.to_plotly_json()", False),
    ("fig.layout.height = 300", False),
    ("class C:\n    def __init__(self):\n        self._d = {}\n    def f(self):\n        return self._d", False),
    ("class C:\n    @classmethod\n    def f(cls):\n        return cls._make()", False),
    ("def _helper():\n    pass\n_helper._calls = 0", False),
    ("from viz import plotly_internals\nplotly_internals._private()", False),
    ("from . import state as _state\n_state._x", False),
    ("def f(_validate=True):\n    pass\nf(_validate=False)", False),
    ('FIRST = "_atlas_first_"\nst.session_state[FIRST + key] = 1', False),
    ("import plotly.io\nplotly.io.to_json", False),
    ("from streamlit.runtime.scriptrunner import get_script_run_ctx", False),
])
def test_the_check_catches_what_it_should(source, bad):
    assert bool(check(source)) == bad, check(source)


def test_a_module_that_cannot_hold_their_objects_may_use_private_names_of_others():
    """model/: torch's and sacrebleu's private names are not this check's business (model/ imports neither plotly
    nor streamlit: tests/test_layers.py), but a private import of plotly is, everywhere."""
    assert check("out._metadata = meta", holds_framework_objects=False) == []
    assert check("from _plotly_utils.utils import x", holds_framework_objects=False)
    assert check("import plotly.io as pio\nfig._data", holds_framework_objects=False)  # it imports plotly


def test_what_a_figure_carries_beside_it_is_found_by_the_figure_and_goes_with_it():
    """The side tables that replaced the attributes behave as the attributes did: a figure's text alternative and
    a kept figure's note come back with that very figure object, not with a copy, and leave with it."""
    import numpy as np
    import plotly.graph_objects as go

    from views.plumbing.figcache import FigureCache, kept_with
    from viz.alt import Alt, ByFigure, describe, with_alt
    from viz.attention import heads_figure

    table = ByFigure()
    fig = go.Figure()
    table.put(fig, "alt")
    assert table.get(fig) == "alt" and table.get(go.Figure()) is None
    del fig
    gc.collect()
    assert len(table) == 0

    fig = with_alt(go.Figure(go.Bar(x=["a"], y=[1])), Alt("Mine."))
    assert describe(fig).summary == "Mine." and describe(go.Figure(fig)).summary != "Mine."

    rng = np.random.default_rng(0)
    p = rng.random((2, 40, 40)).astype(np.float32)
    p /= p.sum(-1, keepdims=True)
    toks = [f"▁t{i}" for i in range(40)]
    cache = FigureCache()
    light = cache.get(heads_figure, p, toks, toks, "enc_self", 0)
    kept = kept_with(light)
    assert kept is not None and kept.alt.summary.startswith("encoder self-attention")
    assert kept.thinned and kept.thinned.startswith("Only some labels fit:")
    assert light.to_dict() is kept.dict
    assert cache.get(heads_figure, p.copy(), toks, toks, "enc_self", 0) is light  # a cache hit: the same record
    assert kept_with(go.Figure()) is None
