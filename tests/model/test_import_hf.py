"""python -m model.import_hf against transformers itself, on a tiny random model of every family (tests/hf_support.py):
M2M100, NLLB-200, mBART-50, T5 v1.1 (gated GELU) and T5 v1.0 (ReLU, tied and scaled generator).

On 20 sentences each: the same token ids as the family's tokenizer, greedy translations identical to
generate(num_beams=1), logits within 1e-4 and the three attention kinds within 1e-5 of output_attentions.
(The app collapses runs of spaces before reading, as the real models' SentencePiece normalizers do; the tokenizers
made here from bare SentencePiece models have no normalizer, so the sentences compared have single spaces.)
"""
from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sentencepiece")
transformers = pytest.importorskip("transformers")

from model.inference.translator import Translator  # noqa: E402
from model.io.import_hf import ImportRefused, import_hf, main  # noqa: E402
from model.nn.hooks import attn_name  # noqa: E402
from model.nn.trace import patterns  # noqa: E402
from tests.hf_support import DE, FAMILIES, PREFIX, assert_same_greedy, build, import_args, sentences  # noqa: E402
from tests.model.test_marian import _edit_config  # noqa: E402

SENTENCES = sentences(DE, 18, 7) + ["Der Hund läuft im Park mit einem roten Ball.", "Ein Zebra frisst Äpfel!"]
CLASSES = {"m2m100": "M2M100ForConditionalGeneration", "nllb": "M2M100ForConditionalGeneration",
           "mbart": "MBartForConditionalGeneration", "t5": "T5ForConditionalGeneration",
           "t5-v1.0": "T5ForConditionalGeneration", "t5-mt5": "MT5ForConditionalGeneration"}


@pytest.fixture(scope="module", params=FAMILIES)
def imported(request, tmp_path_factory):
    """(family, the original with eager attention, its tokenizer, our Translator, the work folder)."""
    family = request.param
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp(f"hf-{family}")
    src = build(family, root / "hf")
    import_hf(str(src), root / "ours", **import_args(family))
    hf = getattr(transformers, CLASSES[family]).from_pretrained(str(src), attn_implementation="eager").eval()
    langs = {k: v for k, v in import_args(family).items() if k.endswith("lang") and not family.startswith("t5")}
    tok = transformers.AutoTokenizer.from_pretrained(str(src), **langs)
    return family, hf, tok, Translator.from_checkpoint(root / "ours"), root


def _prefix(family: str) -> str:
    return PREFIX if family.startswith("t5") else ""


def test_token_ids_equal_the_tokenizers(imported):
    family, _, tok, tr, _ = imported
    for text in SENTENCES + ["Der Hund € läuft ☃.", "ÄÖÜ ß é 123 4.5"]:
        assert tr.prepare(text).ids == tok(_prefix(family) + text)["input_ids"], (family, text)


def test_the_source_shows_what_the_encoder_reads(imported):
    family, _, tok, tr, _ = imported
    source = tr.prepare("Der Hund läuft.")
    if family.startswith("t5"):  # the prompt is read with the text: its pieces are on the axis
        assert "".join(source.tokens).replace("\u2581", " ").strip().startswith(PREFIX.strip())
    else:  # many-to-many: the source language's token first
        assert source.tokens[0] == tr.languages[tr.src_lang] and tr.cfg.lang_tokens
    assert tr.prepare("").tokens == []  # no text, no prompt or language token either


def _hf_pass(hf, src_ids, tgt_ids):
    with torch.inference_mode():
        return hf(input_ids=torch.tensor([src_ids]), decoder_input_ids=torch.tensor([tgt_ids]), output_attentions=True)


def _generate(hf, tr, source, limit):
    """generate(num_beams=1) as the model's own generate() runs it, with the target language forced first. Atlas
    never writes <pad> or the start token (where it is not </s>): the same ids are banned here. Forced </s> at
    the length limit is a length rule: off, and `finished` says where the limit cut."""
    banned = sorted({tr.cfg.pad_idx, tr.cfg.decoder_start_idx} - {tr.cfg.eos_idx})
    with torch.inference_mode():
        return hf.generate(torch.tensor([source.ids]), num_beams=1, do_sample=False, max_new_tokens=limit,
                           bad_words_ids=[[b] for b in banned], forced_eos_token_id=None,
                           forced_bos_token_id=tr.start_prefix[0] if tr.start_prefix else None)[0].tolist()


def test_greedy_translations_equal_generate(imported):
    family, hf, tok, tr, _ = imported
    distinct = set()
    for text in SENTENCES:
        source = tr.prepare(text)
        limit = tr.max_steps(source, None)
        ours = tr.translate(text)
        seq = _generate(hf, tr, source, limit)
        assert_same_greedy(tr, ours, seq, (family, text))
        distinct.update(ours.raw_tokens)
    # Varied output (a tied generator at random writes the same few tokens; the others dozens): a misplaced weight
    # would change it. The logits test below compares every step's distribution as well.
    assert len(distinct) >= 4


def test_logits_and_every_attention_equal_the_originals(imported):
    family, hf, _, tr, _ = imported
    got = []
    handle = tr.model.generator.proj.register_forward_hook(lambda m, i, o: got.append(o))
    try:
        for text in SENTENCES:
            source = tr.prepare(text)
            out_ids = tr.tgt_vocab.encode(tr.translate(text).raw_tokens)
            tgt = [tr.cfg.decoder_start_idx] + out_ids
            out = _hf_pass(hf, source.ids, tgt)
            got.clear()
            with torch.inference_mode():
                _, cache = tr.model.run_with_cache(torch.tensor([source.ids]), torch.tensor([tgt]), patterns)
            assert (got[-1] - out.logits).abs().max() < 1e-4, (family, text)
            for kind, maps in (("enc_self", out.encoder_attentions), ("dec_self", out.decoder_attentions),
                               ("cross", out.cross_attentions)):
                for layer, b in enumerate(maps):
                    assert (cache[attn_name(kind, layer, "hook_pattern")] - b).abs().max() < 1e-5, (family, kind)
    finally:
        handle.remove()


def test_trace_is_the_greedy_translation_and_its_attention_the_originals(imported):
    family, hf, _, tr, _ = imported
    text = SENTENCES[-2]
    r = tr.trace(text)
    assert r.raw_tokens == tr.translate(text).raw_tokens and r.decoding == "greedy"
    if tr.start_prefix:  # the target language's token is step 1, forced
        assert r.steps[0].forced and r.steps[0].chosen == tr.start_prefix[0]
    out = _hf_pass(hf, r.source.ids, [tr.cfg.decoder_start_idx] + tr.tgt_vocab.encode(r.raw_tokens))
    want = torch.stack([c[0] for c in out.cross_attentions])
    assert (torch.tensor(r.trace.probs("cross")) - want).abs().max() < 1e-5


def test_another_language_pair_is_the_same_model_read_otherwise(imported):
    family, hf, _, tr, _ = imported
    if not tr.cfg.lang_tokens:  # T5: the prompt, not a code, says which languages; codes are only labels
        view = tr.with_languages("fr", "de")
        assert view.model is tr.model and view.prepare(SENTENCES[0]).ids == tr.prepare(SENTENCES[0]).ids
        return
    codes = list(tr.languages)
    other = next(c for c in codes if c not in (tr.src_lang, tr.tgt_lang))
    view = tr.with_languages(tr.tgt_lang, other)
    assert view.model is tr.model and view.prepare("Der Hund").tokens[0] == tr.languages[tr.tgt_lang]
    assert view._drafts is tr._drafts  # one int8 draft per model, not per pair
    source = view.prepare(SENTENCES[0])
    seq = _generate(hf, view, source, view.max_steps(source, None))
    ours = view.translate(SENTENCES[0])
    assert view.tgt_vocab.encode(ours.raw_tokens)[0] == view.tgt_vocab.stoi[tr.languages[other]]
    assert view.tgt_vocab.encode(ours.raw_tokens) == seq[1 : 1 + len(ours.raw_tokens)]
    with pytest.raises(ValueError, match="languages"):
        tr.with_languages("xx_unknown", tr.tgt_lang)


def test_folder_and_model_card(imported):
    family, _, _, tr, root = imported
    folder = root / "ours"
    metrics = (folder / "metrics.json").read_text(encoding="utf-8")
    assert str(root) not in metrics  # a checkpoint may be shipped: no path of this machine
    card = json.loads(metrics)["imported"]
    assert card["family"] == ("t5" if family.startswith("t5") else family.replace("nllb", "m2m100"))
    assert card["parameters"] == sum(p.numel() for p in tr.model.parameters())
    assert card["sizes"]["d_model"] == 32 and card["agreement_max_abs_log_prob"] < 1e-4
    assert (folder / "languages.json").is_file() == tr.cfg.lang_tokens
    assert tr.cfg.src_prefix == _prefix(family)


@pytest.fixture(scope="module")
def saved_nllb(tmp_path_factory):
    return build("nllb", tmp_path_factory.mktemp("nllb-src") / "hf")


@pytest.mark.parametrize("changes, words", [
    ({"model_type": "bart"}, ["'bart'", "m2m_100", "mbart", "t5", "marian"]),
    ({"activation_function": "quick_gelu"}, ["activation_function"]),
    ({"decoder_ffn_dim": 128}, ["encoder_ffn_dim"]),
])
def test_what_cannot_be_run_is_one_line_naming_why(saved_nllb, tmp_path, capsys, changes, words):
    src = _edit_config(saved_nllb, tmp_path / "edited", **changes)
    assert main([str(src), "--out", str(tmp_path / "out"), "--src-lang", "deu_Latn", "--tgt-lang", "eng_Latn"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words) and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_missing_sentencepiece_model_or_language_is_one_line(saved_nllb, tmp_path):
    src = tmp_path / "partial"
    shutil.copytree(saved_nllb, src)
    (src / "sentencepiece.bpe.model").unlink()
    with pytest.raises(ImportRefused, match="SentencePiece model"):
        import_hf(str(src), tmp_path / "out", src_lang="deu_Latn", tgt_lang="eng_Latn")
    with pytest.raises(ImportRefused, match="not one of the model's"):
        import_hf(str(saved_nllb), tmp_path / "out2", src_lang="deu_Latn", tgt_lang="klingon")


def test_the_logit_lens_last_layer_is_the_models_own_output(imported):
    """The lens reads every layer as the last one is read (final norm, T5 v1.0's generator scale, generator)."""
    import numpy as np

    from model.analysis.lens import logit_lens

    family, _, _, tr, _ = imported
    r = tr.trace(SENTENCES[0])
    step = min(1, len(r.raw_tokens) - 1)
    lens = logit_lens(tr, SENTENCES[0], r.raw_tokens, step)
    assert abs(float(lens.top_probs[-1][0]) - float(np.exp(r.trace.log_probs[step]).max())) < 1e-5, family


def test_a_marian_folder_goes_through_the_same_door(tmp_path):
    from tests.model.test_marian import build_marian

    src = build_marian(tmp_path / "hf")
    assert main([str(src), "--out", str(tmp_path / "ours")]) == 0
    tr = Translator.from_checkpoint(tmp_path / "ours")
    card = json.loads((tmp_path / "ours" / "metrics.json").read_text(encoding="utf-8"))["imported"]
    assert card["family"] == "marian"
    assert tr.translate(SENTENCES[0]).tokens  # it translates


def test_contributions_decompose_every_block_exactly(imported):
    """ALTI+ on every family (model/analysis/contributions.py): each attention block's output is the sum of its
    transformed vectors, residual and bias, the norm taken through where it comes after (1e-5, float64)."""
    from model.analysis import contributions as C
    from tests.model.test_contributions import check_blocks

    _, _, _, tr, _ = imported
    cfg = tr.model.cfg
    src, tgt = tr.forced_tensors(SENTENCES[0])
    with torch.inference_mode():
        _, cache = tr.model.run_with_cache(src, tgt, C.points(cfg.n_encoder_layers, cfg.n_decoder_layers))
    check_blocks(tr.model, cache)
