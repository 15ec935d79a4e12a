"""AppTest of the views with an imported Marian model (built and imported inside the test) in every view,
labelled with its own languages, its SentencePiece pieces on the axes, its specials kept off the vocabulary map."""
from __future__ import annotations

import json

import pytest

from model import records
from tests.app_support import run_app, serving, visible_text

VIEWS = list(records.VIEWS)
TEXT = "Der Hund läuft im Park."


@pytest.fixture(scope="module")
def marian_root(tmp_path_factory):
    """A checkpoint root holding `tiny-marian`: a random MarianMTModel imported as French → English, so that every
    label the pages show must come from the model's config, not from the shipped model's German → English."""
    import torch

    from model.io.import_marian import import_marian
    from tests.model.test_marian import build_marian

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        base = tmp_path_factory.mktemp("marian_app")
        import_marian(str(build_marian(base / "hf")), base / "root" / "tiny-marian", src_lang="fr", tgt_lang="en")
    finally:
        torch.set_num_threads(threads)
    with serving(base / "root", "tiny-marian"):
        yield base / "root"


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_draws_an_imported_model(marian_root, view):
    at = run_app(view=view, text=TEXT)
    assert not at.exception, at.exception
    assert at.error.len == 0 or view == "Training", [e.value for e in at.error]
    text = visible_text(at)
    assert ":gray[FR]" in text and "German" not in text  # the model's languages, not the shipped model's


def test_axes_show_pieces_with_their_word_start_mark_and_kinds_name_the_languages(marian_root):
    from model.inference.translator import Translator

    tr = Translator.from_checkpoint(marian_root / "tiny-marian")
    pieces = tr.prepare(TEXT).axis_tokens
    assert any(p.startswith("▁") for p in pieces)
    at = run_app(view="Attention", text=TEXT, kind="cross", layer=1, head=1)
    assert not at.exception
    fig = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "head_fig" in c.proto.id)
    ticks = [t.replace("&lt;", "<").replace("&gt;", ">") for t in fig["layout"]["xaxis"]["ticktext"]]
    assert ticks == list(pieces)  # every piece, as the vocabulary spells it
    titles = {a.get("name"): a["text"] for a in fig["layout"]["annotations"]}  # axis titles as notes (viz/axis_notes)
    assert "key (FR, source)" in titles["xaxis title"]
    assert "query (EN, decoder input)" in titles["yaxis title"]
    box = next(s for s in at.selectbox if s.key == "kind")
    assert box.format_func("cross") == "Cross-attention (EN queries → FR keys)"


def test_the_vocabulary_map_leaves_out_marians_specials(marian_root):
    from model.inference.translator import Translator

    tr = Translator.from_checkpoint(marian_root / "tiny-marian")
    itos = tr.src_vocab.itos
    assert itos[-1] == "<pad>"  # Marian's pad is the last id: not a leading block of specials
    at = run_app(view="Embeddings", text=TEXT)
    assert not at.exception
    title = next(json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")
                 if "learned embeddings" in json.loads(c.proto.spec)["layout"].get("title", {}).get("text", ""))
    assert title.startswith(f"{len(itos) - len(tr.special_ids('src')):,} learned embeddings")
    assert "pieces the model knows" in visible_text(at)


def test_positional_page_uses_the_models_layout(marian_root):
    """Marian keeps all sines first: the page's formula must match what the model added (it checks itself)."""
    import re

    at = run_app(view="Positional encoding", text=TEXT)
    assert not at.exception
    note = next(c.value for c in at.caption if "the formula matches" in c.value)
    assert float(re.search(r"to ([0-9.e+-]+)\.$", note).group(1)) < 1e-5
    assert any("sines first" in m.value for m in at.markdown)


def test_decoding_names_the_models_own_start_and_end_tokens(marian_root):
    at = run_app(view="Decoding", text=TEXT)
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "stops at `</s>`" in text and "`<pad>` is never generated" in text and "<bos>" not in text


def test_the_sidebar_takes_the_languages_the_loaded_model_gives(marian_root):
    """A first run draws the sidebar before the model loads, so the sidebar reads the languages from config.json
    (languages_of): they must be the labels of the loaded model (model_facts), and a folder whose config cannot be
    read gets neutral words, not the shipped model's languages."""
    from views.plumbing import state

    at = run_app(view="Overview", text=TEXT)
    assert not at.exception, at.exception
    assert next(t for t in at.text_area if t.key == "text").label == "French sentence"
    for key in map(state.ModelKey.parse, ("tiny-marian", "tiny-marian:untrained")):
        assert state.languages_of(key) == state.model_facts(key)["langs"]
    broken = marian_root / "broken-config"
    broken.mkdir()
    try:
        (broken / "config.json").write_text("{not json", encoding="utf-8")
        assert state.languages_of(state.ModelKey("broken-config")) == state.NO_LANGUAGES
        assert state.languages_of(state.ModelKey("not-offered")) == state.NO_LANGUAGES
    finally:
        (broken / "config.json").unlink()
        broken.rmdir()
