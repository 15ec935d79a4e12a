"""Helpers shared by the AppTest modules."""
from __future__ import annotations

import gzip
import json
import os
import shutil
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


def url(at: AppTest) -> dict:
    """A run's URL query parameters as {key: value} (one value each)."""
    return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def spec(chart) -> dict:
    """A Plotly chart element's figure JSON."""
    return json.loads(chart.proto.spec)


def chart(at: AppTest, key: str) -> dict:
    """The figure JSON of the run's first Plotly chart whose element id holds `key` (its widget key)."""
    return next(spec(c) for c in at.get("plotly_chart") if c.proto.id and key in c.proto.id)


def figures(at: AppTest) -> dict[str, dict]:
    """Chart key -> its figure JSON, for every Plotly chart of the run."""
    return {c.proto.id.rsplit("-", 1)[-1]: spec(c) for c in at.get("plotly_chart")}


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
def demo_checkpoints(tmp_path_factory, name: str, demo: Path | None = None):
    """A checkpoint root of its own holding the tiny trained model: a copy of `demo` (the session's `demo_folder`,
    tests/views/conftest.py), or one trained here without it; served to the app while the block runs."""
    root = tmp_path_factory.mktemp(name)
    if demo is None:
        from tests.tiny_checkpoint import make_tiny_checkpoint

        make_tiny_checkpoint(root / "demo")
    else:
        shutil.copytree(demo, root / "demo")
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


def write_split(folder: Path, split: str, src: list[str], ref: list[str]) -> Path:
    """A Multi30k-like split in `folder` (made if missing): {split}.de.gz and {split}.en.gz, one sentence a line."""
    folder.mkdir(parents=True, exist_ok=True)
    for lang, lines in (("de", src), ("en", ref)):
        with gzip.open(folder / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return folder


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
