"""python -m model.import_hf on FSMT (fairseq's WMT19 transformers) against transformers itself, on a tiny random
FSMT with a tokenizer learnt on the fly (tests/fsmt_support.py).

On 20 sentences (punctuation, quotes, dashes, umlauts, numbers, a word the vocabulary lacks, typed specials): the
pieces and ids of FSMTTokenizer, its decoding, greedy translations identical to generate(num_beams=1), logits within
1e-4 and the three attention kinds within 1e-5 of output_attentions. The reading alone (model/text/moses_bpe.py) is
also compared lowercased and in other languages, and the folder is read with transformers blocked.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sacremoses")
transformers = pytest.importorskip("transformers")

from model.inference.translator import Translator  # noqa: E402
from model.io.import_hf import import_hf, main  # noqa: E402
from model.nn.hooks import attn_name  # noqa: E402
from model.nn.trace import patterns  # noqa: E402
from model.text.moses_bpe import MosesBpeCodec, read_merges  # noqa: E402
from tests.fsmt_support import build_fsmt, tokenizer  # noqa: E402
from tests.hf_support import DE, EN, assert_same_greedy, sentences  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = sentences(DE, 12, 7) + [
    "Der Hund läuft im Park mit einem roten Ball.",
    "Ein Zebra frisst Äpfel!",  # Z, Ä and "pf" are pieces the source vocabulary lacks: <unk>
    "Die Frau (mit dem Kind) liest 3 Bücher, nicht 4.5 oder 1,000?",
    'Das Haus-Kind sieht "Schnee" & Wasser: 12 Bälle; usw. z.B. 2024.',
    "„Der Mann“ spielt… im Park？",  # German quotes, an ellipsis, a full-width question mark
    "Ein Kind schläft – der Hund nicht!",
    "Die Katze, der Hund und die Frau sehen 1 2 3 Bälle.",
    "Der Hund </s> läuft <unk> im Park.",  # specials typed in the text stay whole, as in the tokenizer
]
ENGLISH = sentences(EN, 10, 3) + ['The dog\'s "red" ball & the cat - 3.5 [big] <small> | 1,000!', "Don't run, cat."]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(the original with eager attention, its tokenizer, our Translator, the work folder)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("fsmt")
    src = build_fsmt(root / "hf")
    import_hf(str(src), root / "ours")
    hf = transformers.FSMTForConditionalGeneration.from_pretrained(str(src), attn_implementation="eager").eval()
    hf.generation_config.max_length = None  # max_new_tokens says how long
    return hf, transformers.AutoTokenizer.from_pretrained(str(src)), Translator.from_checkpoint(root / "ours"), root


def test_pieces_and_ids_equal_the_tokenizers(imported):
    _, tok, tr, _ = imported
    for text in SENTENCES:
        source = tr.prepare(text)
        assert source.tokens == tok.tokenize(text), text  # shown as the tokenizer shows them, </w> kept
        assert source.ids == tok(text)["input_ids"], text
    assert any(tr.prepare("Ein Zebra frisst Äpfel!").unknown)


def test_text_is_the_tokenizers_decoding(imported):
    _, tok, tr, _ = imported
    for text in ENGLISH:
        ids = tr.tgt_vocab.encode(tr.target_tokens(text))
        for shown in (ids, [0] + ids[:3] + [3, 2] + ids[3:] + [1, 2]):  # specials dropped, as skip_special_tokens
            assert tr.detokenize(tr.tgt_vocab.decode(shown)) == tok.decode(shown, skip_special_tokens=True), text
    for text in SENTENCES:
        ours = tr.translate(text)
        assert ours.text == tok.decode(tr.tgt_vocab.encode(ours.raw_tokens), skip_special_tokens=True), text


@pytest.mark.parametrize("options", [{"do_lower_case": True}, {"langs": ["en", "de"]}, {"langs": ["fr", "en"]},
                                     {"clean_up_tokenization_spaces": True}])
def test_the_reading_alone_equals_the_tokenizer_with_its_options(imported, options):
    """Lowercasing, Moses' rules of other languages (source and target), transformers' clean-up of spaces."""
    *_, root = imported
    folder = root / "hf"
    tok = tokenizer(folder, **options)
    tgt = {t: i for i, t in tok.decoder.items()}
    codec = MosesBpeCodec(read_merges(folder / "merges.txt"), (tok.src_lang, tok.tgt_lang), (tok.encoder, tgt),
                          tok.all_special_tokens, tok.do_lower_case, tok.clean_up_tokenization_spaces)
    for text in SENTENCES + ENGLISH:
        pieces = codec.source_pieces(text)
        assert pieces == tok.tokenize(text), (options, text)
        ids = [tgt.get(p, tgt[tok.unk_token]) for p in codec.target_pieces(text)]
        assert codec.detokenize([tok.decoder[i] for i in ids]) == tok.decode(ids, skip_special_tokens=True), text


def _hf_pass(hf, src_ids, tgt_ids):
    """Teacher-forced; use_cache=False, or FSMTModel makes no causal mask (hf_fsmt.agreement says why)."""
    with torch.inference_mode():
        return hf(input_ids=torch.tensor([src_ids]), decoder_input_ids=torch.tensor([tgt_ids]), output_attentions=True,
                  use_cache=False)


def test_greedy_translations_equal_generate(imported):
    """As test_import_hf's: Atlas never writes <pad>, so generate() bans it too, and its forced </s> at the length
    limit is off."""
    hf, _, tr, _ = imported
    distinct = set()
    for text in SENTENCES:
        source = tr.prepare(text)
        ours = tr.translate(text)
        with torch.inference_mode():
            seq = hf.generate(torch.tensor([source.ids]), num_beams=1, do_sample=False,
                              max_new_tokens=tr.max_steps(source, None), bad_words_ids=[[tr.cfg.pad_idx]],
                              forced_eos_token_id=None)[0].tolist()
        assert_same_greedy(tr, ours, seq, text)
        distinct.update(ours.raw_tokens)
    assert len(distinct) >= 4
    r = tr.trace(SENTENCES[12])
    assert r.raw_tokens == tr.translate(SENTENCES[12]).raw_tokens


def test_logits_and_every_attention_equal_the_originals(imported):
    hf, _, tr, _ = imported
    got = []
    handle = tr.model.generator.proj.register_forward_hook(lambda m, i, o: got.append(o))
    try:
        for text in SENTENCES:
            source = tr.prepare(text)
            tgt = [tr.cfg.decoder_start_idx] + tr.tgt_vocab.encode(tr.translate(text).raw_tokens)
            out = _hf_pass(hf, source.ids, tgt)
            got.clear()
            with torch.inference_mode():
                _, cache = tr.model.run_with_cache(torch.tensor([source.ids]), torch.tensor([tgt]), patterns)
            assert (got[-1] - out.logits).abs().max() < 1e-4, text
            for kind, maps in (("enc_self", out.encoder_attentions), ("dec_self", out.decoder_attentions),
                               ("cross", out.cross_attentions)):
                assert len(maps) == 2
                for layer, b in enumerate(maps):
                    assert (cache[attn_name(kind, layer, "hook_pattern")] - b).abs().max() < 1e-5, (kind, text)
    finally:
        handle.remove()


def test_folder_config_and_model_card(imported):
    _, _, tr, root = imported
    folder = root / "ours"
    assert {"merges.txt", "moses_bpe.json", "vocab.src.json", "vocab.tgt.json"} <= {p.name for p in folder.iterdir()}
    assert not (folder / "source.spm").exists()
    cfg = tr.cfg
    assert (cfg.tokenizer, cfg.norm_first, cfg.pe_layout, cfg.pos_offset, cfg.share_embeddings, cfg.tie_weights,
            cfg.final_logits_bias, cfg.decoder_start_idx) == ("moses_bpe", False, "fairseq", 2, False, False, False, 2)
    assert cfg.src_vocab_size != cfg.tgt_vocab_size and (cfg.src_lang, cfg.tgt_lang) == ("de", "en")
    metrics = (folder / "metrics.json").read_text(encoding="utf-8")
    assert str(root) not in metrics  # a checkpoint may be shipped: no path of this machine
    card = json.loads(metrics)["imported"]
    assert card["family"] == "fsmt" and card["class"] == "FSMTForConditionalGeneration"
    assert card["parameters"] == sum(p.numel() for p in tr.model.parameters())
    assert card["agreement_max_abs_log_prob"] < 1e-4


def test_the_app_reads_it_without_transformers(imported):
    *_, root = imported
    code = ("import sys; sys.modules['transformers'] = None\n"  # any import of it fails
            "from model.inference.translator import Translator\n"
            f"tr = Translator.from_checkpoint({str(root / 'ours')!r})\n"
            "print(tr.translate('Der Hund läuft im Park.').raw_tokens)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "</w>" in done.stdout


@pytest.mark.parametrize("changes, words", [
    ({"activation_function": "quick_gelu"}, ["activation_function"]),
    ({"decoder_ffn_dim": 128}, ["encoder_ffn_dim", "decoder_ffn_dim"]),
    ({"tgt_vocab_size": 500}, ["tgt_vocab_size", "vocab-tgt.json"]),
    ({"model_type": "fsmt2"}, ["'fsmt2'", "fsmt", "marian"]),
    (None, ["merges.txt"]),  # the merges missing
])
def test_what_cannot_be_run_is_one_line_naming_why(imported, tmp_path, capsys, changes, words):
    *_, root = imported
    src = tmp_path / "edited"
    shutil.copytree(root / "hf", src)
    if changes is None:
        (src / "merges.txt").unlink()
    else:
        cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
        (src / "config.json").write_text(json.dumps({**cfg, **changes}), encoding="utf-8")
    assert main([str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words) and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
