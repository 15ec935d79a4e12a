"""Fixtures shared by the AppTest modules of tests/views (plain helpers are in tests/app_support.py).

The tiny `demo` checkpoint takes seconds to train, so it is trained once a session (`demo_folder`). Modules that only
read it are served that one folder (`checkpoints`); a module whose tests write into its checkpoint root (a broken
checkpoint, a head report, a trained model beside `demo`) gets a root of its own with a copy of it instead
(`app_support.demo_checkpoints`, `heads_env`), so that nothing one module writes is seen by another.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.app_support import demo_checkpoints, serving, write_split


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory) -> Path:
    """The tiny trained model `demo` (tests/tiny_checkpoint.py), trained once a session. Never written: to change
    it, copy it."""
    from tests.tiny_checkpoint import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp_path_factory.mktemp("ckpts") / "demo")


@pytest.fixture(scope="module")
def checkpoints(demo_folder):
    """The checkpoint root holding `demo`, served to the app (ATLAS_CHECKPOINT_DIR, ATLAS_DEFAULT_MODEL) while the
    module runs. The same root for every module: its tests must write nothing into it (a module that does overrides
    this fixture with a root of its own, as test_app.py and test_app_labels.py do)."""
    with serving(demo_folder.parent) as root:
        yield root


@pytest.fixture(scope="module")
def demo_translator(checkpoints):
    """The Translator of the served `demo` model, to compute what the pages must show."""
    from model.inference.translator import Translator

    return Translator.from_checkpoint(checkpoints / "demo")


@pytest.fixture
def toy_key():
    """A toy model kept on the server as if trained on the Training page (random weights: what it says must hold)."""
    from model import service
    from model.training import toy
    from views.plumbing import state

    key = state.keep_toy("copy", service.Model(toy.ToyTranslator(toy.EncoderDecoder(toy.toy_config()), "copy")))
    return str(key)  # as a link names it


@pytest.fixture(scope="module")
def heads_env(tmp_path_factory, demo_folder):
    """For the Heads page's tests, which write head reports and checkpoints into their root: `demo` served from a
    root of this module's own, a 6-pair validation split in ATLAS_DATA_DIR (the tiny model's four pairs and two it
    never saw), and an empty cache folder in XDG_CACHE_HOME.
    {"root", "data", "cache", "src", "ref" (the split's sentences)}."""
    from tests.tiny_checkpoint import ENGLISH, GERMAN

    src = GERMAN + ["Ein Zebra rennt im Schnee!", "Zwei Männer spielen Fußball"]
    ref = ENGLISH + ["A zebra runs in the snow!", "Two men play soccer"]
    base = tmp_path_factory.mktemp("heads_env")
    data = write_split(base / "data", "val", src, ref)
    mp = pytest.MonkeyPatch()
    mp.setenv("ATLAS_DATA_DIR", str(data))
    mp.setenv("XDG_CACHE_HOME", str(base / "cache"))
    try:
        with demo_checkpoints(tmp_path_factory, "heads_ckpts", demo_folder) as root:
            yield {"root": root, "data": data, "cache": base / "cache", "src": src, "ref": ref}
    finally:
        mp.undo()
