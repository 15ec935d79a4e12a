"""Real-browser tests of every view on a model of each imported family: `streamlit run app.py` serving tiny random
M2M100, NLLB-200, mBART-50, Flan-T5-like, T5Gemma and FSMT models (tests/hf_support.py, t5gemma_support.py,
fsmt_support.py; imported by python -m model.import_hf), in Chromium. Every page draws, with no exception, and names
the model's own languages."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from browser_support import (
    MAIN,
    assert_clean,
    choose_view,
    new_page,
    open_app,
    start_test_server,
    stop_server,
    wait_charts,
)
from tests.fsmt_support import build_fsmt
from tests.hf_support import build, import_args
from tests.t5gemma_support import build_t5gemma

FAMILIES = ("m2m100", "nllb", "mbart", "t5", "t5gemma", "fsmt")
BUILDERS = {"t5gemma": build_t5gemma, "fsmt": build_fsmt}  # the others: tests/hf_support.py build
VIEWS = ("Overview", "Embeddings", "Positional encoding", "Attention", "Inside one head", "Masks", "Decoding",
         "What if", "Heads", "Training")
# Views that draw no chart for these models: no head report yet (the page offers to compute it), no training film.
NO_CHARTS = {"Heads": "Compute the head report", "Training": "no film"}
TEXT = "Der Hund läuft im Park mit einem roten Ball."
# What the header's tags say: the short codes of the pair (of the import's labels for the prompted T5 model).
TAGS = {"m2m100": ("DE", "EN"), "nllb": ("DEU", "ENG"), "mbart": ("DE", "EN"), "t5": ("DE", "EN"),
        "t5gemma": ("DE", "EN"), "fsmt": ("DE", "EN")}


@pytest.fixture(scope="module")
def families_server(tmp_path_factory):
    """One server offering a tiny model of each family (one torch thread, a cache folder of its own)."""
    pytest.importorskip("transformers")
    from model.io.import_hf import import_hf

    root = tmp_path_factory.mktemp("families")
    for family in FAMILIES:
        if family in BUILDERS:
            import_hf(str(BUILDERS[family](root / "hf" / family)), root / "ckpts" / family, src_lang="de",
                      tgt_lang="en")
        else:
            import_hf(str(build(family, root / "hf" / family)), root / "ckpts" / family, **import_args(family))
    server = start_test_server(root / "ckpts", FAMILIES[0], tmp_path_factory)
    yield server
    stop_server(server)


@pytest.fixture
def family_page(chromium, families_server):
    pg = new_page(chromium)
    yield pg
    pg.context.close()


@pytest.mark.browser
@pytest.mark.slow  # every view of one model
@pytest.mark.parametrize("family", FAMILIES)
def test_every_view_draws_a_model_of_each_family(family_page, families_server, family):
    open_app(family_page, families_server.link(view=VIEWS[0], text=TEXT, ckpt=family))
    src, tgt = TAGS[family]
    for view in VIEWS:
        if view != VIEWS[0]:
            choose_view(family_page, view, timeout=60_000)
        main = family_page.locator(MAIN)
        if view in NO_CHARTS:
            expect(main.get_by_text(NO_CHARTS[view]), f"{family} {view}").not_to_have_count(0, timeout=60_000)
        else:
            assert wait_charts(family_page, 60_000) >= 1, (family, view)
        assert_clean(family_page, f"{family} {view}")
    text = family_page.locator("body").inner_text()
    assert src in text and tgt in text, family  # the header's tags: the model's languages
    if family == "t5":  # the prompt is read with the sentence: its pieces open the source line
        assert "▁translate" in text or "translate" in text
