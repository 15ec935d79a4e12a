"""A many-to-many model's languages in the sidebar and the URL; a prompted T5 model has none to choose."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from tests.app_support import run_app, visible_text  # noqa: E402
from tests.hf_support import build, import_args  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A checkpoint folder holding a tiny imported NLLB-200 and a tiny imported Flan-T5-like model."""
    from model.io.import_hf import import_hf

    root = tmp_path_factory.mktemp("families")
    for family in ("nllb", "t5"):
        import_hf(str(build(family, root / "hf" / family)), root / "ckpts" / family, **import_args(family))
    return root / "ckpts"


@pytest.fixture()
def server(folder, monkeypatch):
    monkeypatch.setenv("ATLAS_CHECKPOINT_DIR", str(folder))
    monkeypatch.setenv("ATLAS_DEFAULT_MODEL", "nllb")
    return folder


def test_model_keys_round_trip():
    from views.plumbing.languages import ModelKey, language_labels, language_name

    twin = ModelKey.parse("nllb@deu_Latn>eng_Latn:untrained")
    assert twin == ModelKey("nllb", twin=True, pair=("deu_Latn", "eng_Latn"))
    assert twin.base == ModelKey("nllb", twin=True) and twin.other_twin().twin is False
    assert twin.folder().name == "nllb"  # a pair reads the folder's weights: no folder is named after the pair
    assert ModelKey.parse("multi30k-de-en") == ModelKey("multi30k-de-en")
    toy = ModelKey.parse("toy:copy:ab12")
    assert toy == ModelKey("copy", run="ab12") and toy.toy and toy.other_twin() == toy
    assert toy.with_pair("de", "en") == toy and ModelKey("m").with_pair("de", None) == ModelKey("m")
    for text in ("nllb@deu_Latn>eng_Latn:untrained", "multi30k-de-en", "m:untrained", "toy:copy:ab12", "a@b>c"):
        assert str(ModelKey.parse(text)) == text
    assert len({ModelKey.parse("m"), ModelKey("m"), ModelKey("m", twin=True)}) == 2  # hashable: caches key by it
    assert [language_name(c) for c in ("de", "de_DE", "deu_Latn", "xx_Yyyy")] == ["German"] * 3 + ["xx_Yyyy"]
    assert language_labels(ModelKey("m"), "deu_Latn", "en_XX")["src"] == "DEU"


def test_the_sidebar_offers_the_models_languages_and_the_url_keeps_the_pair(server):
    at = run_app(view="Decoding", text="Der Hund läuft.", src_lang="fra_Latn", tgt_lang="spa_Latn")
    assert not at.exception
    boxes = {s.label: s for s in at.selectbox}
    assert boxes["From"].value == "fra_Latn" and boxes["Into"].value == "spa_Latn"
    assert set(boxes["From"].options) >= {"French (fra_Latn)", "German (deu_Latn)", "Spanish (spa_Latn)"}
    assert at.query_params["src_lang"] == "fra_Latn" and at.query_params["tgt_lang"] == "spa_Latn"
    text = visible_text(at)
    assert "French" in text and "German sentence" not in text


def test_an_unknown_code_in_a_link_falls_back_to_the_models_own(server):
    at = run_app(view="Overview", text="Der Hund läuft.", src_lang="xx_Unknown", tgt_lang="spa_Latn")
    assert not at.exception
    boxes = {s.label: s.value for s in at.selectbox}
    assert boxes["From"] == "deu_Latn" and boxes["Into"] == "spa_Latn"


def test_the_pair_is_what_the_model_reads_and_writes(server):
    """The trace the pages draw starts from the chosen languages' tokens: the page's model is the pair's."""
    from views.plumbing import state

    key = state.ModelKey("nllb").with_pair("fra_Latn", "spa_Latn")
    model, error = state.load_model(key)
    assert error is None
    r = state.trace_sentence(key, "Der Hund läuft.", 0)
    assert r.source.tokens[0] == "fra_Latn" and r.raw_tokens[0] == "spa_Latn" and r.steps[0].forced
    assert "spa_Latn" not in r.text.split()[:1]  # the forced language token is not part of the text
    assert state.languages_of(key)["tgt_name"] == "Spanish"


def test_a_prompted_model_has_no_languages_to_choose_and_shows_its_prompt(server, monkeypatch):
    monkeypatch.setenv("ATLAS_DEFAULT_MODEL", "t5")
    at = run_app(view="Overview", text="Der Hund läuft.")
    assert not at.exception
    assert not {"From", "Into"} & {s.label for s in at.selectbox}
    assert "translate" in visible_text(at)  # the prompt's pieces are what the encoder reads: on the source line


def test_the_quiz_on_a_many_to_many_model_reveals_at_the_first_click_and_says_who_forced_step_1(server):
    """A link without languages: the session's first run already names the pair (a key that changed on the second
    run hid the first reveal again). Step 1 is the target language's token, forced by the model, not by the user."""
    at = run_app(view="Decoding", text="Der Hund läuft.", present=1, focus="quiz", quiz="next", dec_step=1)
    assert not at.exception
    at.main.button(key="quiz_reveal").click().run()
    assert not at.exception and at.session_state["reveal"] is True
    said = next(m.value for m in at.markdown if m.value.startswith("**Next:"))
    assert "eng\\_Latn" in said and "the target language's token" in said and "forced by you" not in said
    plain = run_app(view="Decoding", text="Der Hund läuft.", dec_step=1)
    chosen = next(m.value for m in plain.markdown if m.value.startswith("Chosen:"))
    assert "the target language's token" in chosen and "by you" not in chosen
    forced = run_app(view="Decoding", text="Der Hund läuft.", dec_step=2, prefix="eng_Latn ▁Der")
    assert "forced by you" in next(m.value for m in forced.markdown if m.value.startswith("Chosen:"))


def test_a_pairs_head_report_is_its_own_and_the_models_own_pair_reads_the_checkpoints(server):
    """`python -m model.analyze --checkpoint FOLDER` writes the report of the languages the checkpoint reads beside
    it; another pair's report would describe other sentences, so it has a cache folder of its own."""
    from views.parts.heads_report import report_paths
    from views.plumbing import state

    own = state.config_languages(state.ModelKey("nllb"))
    other = ("fra_Latn", "spa_Latn")
    assert own != other
    assert report_paths(state.ModelKey("nllb").with_pair(*own))[0].parent == server / "nllb"
    paths = report_paths(state.ModelKey("nllb").with_pair(*other))
    assert len(paths) == 1 and paths[0].parent.name == "nllb@fra_Latn-spa_Latn"
    assert len(report_paths(state.ModelKey("nllb", twin=True).with_pair(*own))) == 1  # the twin's weights are not there


def test_side_b_of_two_models_reads_between_the_sidebars_languages(server):
    """One sentence, two models: side B (the untrained twin by default) translates between the languages the
    sidebar chose, as side A does, not its config's; the labels name the models, not the pair's key."""
    at = run_app(view="Attention", text="Der Hund läuft.", compare="model", src_lang="fra_Latn", tgt_lang="spa_Latn")
    assert not at.exception
    side_b = next(m.value for m in at.markdown if m.value.startswith("#### :gray[B ·"))
    assert side_b.startswith("#### :gray[B · FRA]") and ":gray[→ SPA]" in side_b, side_b
    captions = " ".join(c.value for c in at.caption)
    assert "B · nllb \\(untrained\\)" in captions and "@" not in captions.split("B · ")[1][:40], captions  # escaped


def test_presenter_mode_draws_side_b_under_side_a_in_the_header(server):
    """In presenter mode the header is the page's first line: side B's sentence comes after side A's, in the
    header's own place (drawn before it, it stood above A, under Streamlit's toolbar button)."""
    at = run_app(view="Attention", text="Der Hund läuft.", compare="model", present="1")
    assert not at.exception
    lines = [m.value for m in at.markdown if m.value.startswith("#### :gray[")]
    assert [line[:13] for line in lines] == ["#### :gray[A ", "#### :gray[B "], lines
