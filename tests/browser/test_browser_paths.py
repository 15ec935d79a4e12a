"""Real-browser test: no page shows a server's absolute path. Every view, the ablation's BLEU, and the error states (a
model the server does not offer, a broken checkpoint, an empty text, the validation data missing) are walked, and
the page's text, its links and their download names hold neither the repository's folder, nor the data folder,
nor the test's temporary, cache and home folders: a page names a folder relative to the checkpoint folder or by its
setting (`$ATLAS_DATA_DIR`)."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from browser_support import (
    EXCEPTION,
    MAIN,
    ROOT,
    choose_view,
    enter_text,
    new_page,
    open_app,
    runs,
    start_server,
    stop_server,
    wait_idle,
    wait_new_run,
    widget,
)
from model import records
from tiny_checkpoint import ENGLISH, GERMAN

SENTENCE = GERMAN[3]

# The app, with Multi30k looked for in $ATLAS_DATA_DIR only: the folders beside the repository may hold it on this
# machine, and the test empties that folder to see what a page says when the validation data is missing.
APP = '''import os, runpy, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from model.analysis import experiments
experiments.data_dir_candidates = lambda: [Path(os.environ["ATLAS_DATA_DIR"])]
runpy.run_path(str(Path({root!r}) / "app.py"), run_name="__main__")
'''

# What a reader sees of the page: its text, and every link's address and download name.
SHOWN_JS = """() => document.body.innerText + '\\n' + [...document.querySelectorAll('a[href], a[download]')]
  .map(a => a.getAttribute('href') + ' ' + (a.getAttribute('download') || '')).join('\\n')"""


@pytest.fixture(scope="module")
def paths_server(atlas_checkpoints, tmp_path_factory):
    """A server of its own: the session's models plus a broken one, a validation split in $ATLAS_DATA_DIR, a cache
    folder of its own; `server.forbidden` lists the absolute folders no page may show."""
    base = tmp_path_factory.mktemp("paths")
    root = base / "checkpoints"
    shutil.copytree(atlas_checkpoints, root, ignore=shutil.ignore_patterns("broken"))
    shutil.copytree(root / "demo", root / "broken")
    weights = root / "broken" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    data, cache = base / "data", base / "cache"
    data.mkdir()
    write_val(data)
    script = base / "paths_app.py"
    script.write_text(APP.format(root=str(ROOT)), encoding="utf-8")
    server = start_server(root, "demo", base / "streamlit.log", script=str(script),
                          extra_env={"OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(cache), "ATLAS_DATA_DIR": str(data)})
    server.data = data
    server.forbidden = [p for p in (str(ROOT), str(ROOT.parent / "shared"), str(atlas_checkpoints), str(root),
                                    str(data), str(cache), str(tmp_path_factory.getbasetemp()), str(Path.home()))
                        if len(p) > 1]
    yield server
    stop_server(server)


def write_val(data: Path) -> None:
    for lang, lines in (("de", GERMAN), ("en", ENGLISH)):
        with gzip.open(data / f"val.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def assert_no_path(pg, server, where: str) -> None:
    assert pg.locator(EXCEPTION).count() == 0, f"{where}: {pg.locator(EXCEPTION).all_inner_texts()[:1]}"
    shown = pg.evaluate(SHOWN_JS)
    for path in server.forbidden:
        at = shown.find(path)
        assert at < 0, f"{where}: a server path on the page: …{shown[max(0, at - 120): at + len(path) + 80]}…"


def measure_bleu(pg) -> None:
    """Press the ablation's "Measure validation BLEU" and wait for what it says (a metric or a warning)."""
    before = runs(pg)
    widget(pg, "ablate_bleu").locator("button").click()
    wait_new_run(pg, before, timeout=120_000)
    pg.locator(f"{MAIN} [data-testid='stMetric'], {MAIN} [data-testid='stAlertContentWarning']").first.wait_for()


@pytest.mark.browser
@pytest.mark.slow
def test_no_page_shows_a_server_path(chromium, paths_server):
    pg = new_page(chromium)
    try:
        open_app(pg, paths_server.link(view="Overview", text=SENTENCE))
        for view in records.VIEWS:
            if view != "Overview":
                choose_view(pg, view)
            wait_idle(pg)
            assert_no_path(pg, paths_server, view)
        open_app(pg, paths_server.link(view="Training", ckpt="filmed", text=SENTENCE))  # a model with a film
        assert_no_path(pg, paths_server, "Training, a model with a film")
        open_app(pg, paths_server.link(view="Attention", kind="cross", layer=1, text=SENTENCE, off="cross-1-1"))
        measure_bleu(pg)
        # the metric or warning measure_bleu waited for may come before these lines of text
        expect(pg.locator(MAIN).get_by_text("sacreBLEU")).not_to_have_count(0, timeout=60_000)
        expect(pg.locator(MAIN).get_by_text("$ATLAS_DATA_DIR")).not_to_have_count(0, timeout=60_000)
        assert_no_path(pg, paths_server, "the ablation's BLEU")
    finally:
        pg.context.close()


@pytest.mark.browser
@pytest.mark.slow
def test_no_error_state_shows_a_server_path(chromium, paths_server):
    pg = new_page(chromium)
    try:
        for ckpt, says in (("no-such-model", "does not offer"), ("broken", "checkpoints/broken/model.safetensors")):
            open_app(pg, paths_server.link(view="Overview", ckpt=ckpt, text=SENTENCE))
            assert pg.locator(MAIN).get_by_text(says).count() >= 1, ckpt
            assert_no_path(pg, paths_server, f"ckpt={ckpt}")
        open_app(pg, paths_server.link(view="Overview", text=SENTENCE))
        enter_text(pg, "")
        assert pg.locator(MAIN).get_by_text("Type a German sentence").count() >= 1
        assert_no_path(pg, paths_server, "an empty text")
        for f in paths_server.data.iterdir():  # the validation data missing
            f.unlink()
        try:
            open_app(pg, paths_server.link(view="Attention", kind="cross", layer=1, text=SENTENCE, off="cross-1-1"))
            measure_bleu(pg)
            assert pg.locator(MAIN).get_by_text("Validation data not found").count() >= 1
            assert_no_path(pg, paths_server, "the ablation without validation data")
            open_app(pg, paths_server.link(view="Heads", ckpt="demo:untrained", text=SENTENCE))  # no report yet
            assert_no_path(pg, paths_server, "Heads without a report or validation data")
        finally:
            write_val(paths_server.data)
    finally:
        pg.context.close()
