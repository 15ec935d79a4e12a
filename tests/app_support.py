"""Helpers shared by the AppTest modules."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def run_app(**params) -> AppTest:
    """Run app.py once with these URL query parameters."""
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = str(v)
    at.run()
    return at


def array(value):
    """A plotly JSON array as NumPy: a plain list, or plotly's typed array {"dtype", "bdata" (base64), "shape"}."""
    import numpy as np

    if isinstance(value, dict):
        import base64

        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return data.reshape([int(n) for n in str(shape).split(",")] if shape else -1).astype(float)
    return np.array(value, dtype=float)


def visible_text(at: AppTest) -> str:
    """Markdown, captions and alerts of a run, joined."""
    parts = [e.value for e in at.markdown] + [e.value for e in at.caption] + [e.value for e in at.info]
    parts += [e.value for e in at.warning] + [e.value for e in at.error]
    return "\n".join(str(p) for p in parts)


def md_tables(at: AppTest) -> list[list[dict]]:
    """The run's Markdown tables (views/parts/widgets.py `table`), each as rows of {header: cell text}, cells
    unescaped."""
    import html
    import re

    def cells(line: str) -> list[str]:
        parts = re.split(r"(?<!\\) \| ", line.strip()[2:-2])  # a pipe inside a cell is escaped
        return [html.unescape(re.sub(r"\\(.)", r"\1", p)).strip() for p in parts]

    tables = []
    for m in at.markdown:
        lines = str(m.value).splitlines()
        lines = lines[next((i for i, line in enumerate(lines) if line.startswith("| ")), len(lines)):]  # a region's
        if len(lines) >= 2 and set(lines[1]) <= set("|-:"):
            head = cells(lines[0])
            tables.append([dict(zip(head, cells(line))) for line in lines[2:] if line.startswith("| ")])
    return tables


@contextmanager
def demo_checkpoints(tmp_path_factory, name: str):
    """A checkpoint root holding the tiny trained model `demo`, served to the app while the block runs."""
    from tests.tiny_checkpoint import make_tiny_checkpoint

    root = tmp_path_factory.mktemp(name)
    make_tiny_checkpoint(root / "demo")
    with serving(root):
        yield root


@contextmanager
def serving(root: Path, model: str = "demo"):
    """Point the app at a checkpoint root (ATLAS_CHECKPOINT_DIR / ATLAS_DEFAULT_MODEL) and restore them after."""
    keys = ("ATLAS_CHECKPOINT_DIR", "ATLAS_DEFAULT_MODEL")
    old = {k: os.environ.get(k) for k in keys}
    os.environ["ATLAS_CHECKPOINT_DIR"], os.environ["ATLAS_DEFAULT_MODEL"] = str(root), model
    try:
        yield root
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def font_sizes(obj):
    """Every font size set anywhere in a plotly figure's JSON (a dict, or a list of them)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key.endswith("font") and isinstance(value, dict) and value.get("size") is not None:
                size = value["size"]
                yield from (size if isinstance(size, list) else [size])
            yield from font_sizes(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from font_sizes(item)
