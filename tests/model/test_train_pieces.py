"""python -m model.train --tokenizer sentencepiece on a tiny corpus the tests write: the pieces are trained on
the training split alone and repeatably, the checkpoint loads and reads unseen words as pieces, the film's
axes are pieces, --resume reuses the .spm files, and the word-level path is what it was."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from test_film import write_corpus

from model.inference.translator import Translator
from model.io.checkpoint import SRC_SPM, TGT_SPM, CheckpointError, load_checkpoint
from model.text.pieces import WORD_START, PieceCodec, train_piece_model, vocab_of
from model.text.tokenize import clean_text, tokenize
from model.text.vocab import SPECIALS, UNK, Vocab
from model.training import train as train_cli
from model.training.film_file import load_film
from model.training.vocabularies import encode_pairs
from test_model_data import synthetic_corpus, train_args

torch.set_num_threads(1)
SIZE = 60  # pieces asked for; the 40-pair corpus has fewer, so the trainer takes what it has
# An unseen compound of the corpus's letters: a word vocabulary has no entry for it, pieces spell it.
UNSEEN = "Ein Mann springt im Strandpark."


def piece_args(data_dir, out, epochs, *extra):
    return train_args(data_dir, out, epochs, "--tokenizer", "sentencepiece", "--spm-vocab-size", str(SIZE),
                      "--test-split", "", *extra)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("pieces_data"))


@pytest.fixture(scope="module")
def three_epochs(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("pieces3") / "ckpt"
    assert train_cli.main(piece_args(corpus, out, 3)) == 0
    return out


@pytest.fixture(scope="module")
def translator(three_epochs):
    return Translator.from_checkpoint(three_epochs)


def test_checkpoint_holds_its_piece_models_and_our_specials(three_epochs):
    out = three_epochs
    assert (out / SRC_SPM).is_file() and (out / TGT_SPM).is_file()
    model, sv, tv, metrics = load_checkpoint(out)
    cfg = model.cfg
    assert cfg.tokenizer == "sentencepiece"
    for vocab, spm_file in ((sv, SRC_SPM), (tv, TGT_SPM)):
        assert vocab.itos[:4] == list(SPECIALS) and len(vocab) <= SIZE
        assert vocab.itos == vocab_of(out / spm_file).itos  # the vocabulary is the model's pieces, ids agree
        assert not any(t in ("<s>", "</s>") for t in vocab.itos)  # no second set of SentencePiece's own specials
    assert (cfg.pad_idx, cfg.decoder_start_idx, cfg.eos_idx) == (1, 2, 3)  # as in a word vocabulary
    assert "▁Ein" in sv and any(t.startswith(WORD_START) for t in tv.itos)
    assert metrics["training"]["pieces"]["trained_on"] == "train split"
    assert 0 <= metrics["val"]["greedy"]["sacrebleu"] <= 100


def test_pieces_come_from_the_training_split_alone_and_repeat(corpus, three_epochs):
    train_de = [clean_text(de) for de, _ in synthetic_corpus()]
    again = train_piece_model(train_de, SIZE, "unigram", 0)
    assert again == (three_epochs / SRC_SPM).read_bytes()  # byte for byte: same sentences, same options
    # Reading val too would change the counts and so the pieces: the equality above means train alone.
    val_de = [clean_text(de) for de, _ in synthetic_corpus()[1:40:10]]  # write_corpus's val
    assert train_piece_model(train_de + val_de, SIZE, "unigram", 0) != again


def test_an_unseen_word_is_read_as_known_pieces(translator):
    words = Vocab.build((tokenize(de, "de") for de, _ in synthetic_corpus()), min_freq=1)
    assert "Strandpark" not in words  # what a word model would turn into <unk>
    source = translator.prepare(UNSEEN)
    assert UNK not in source.tokens and not any(source.unknown)
    assert "".join(source.tokens).replace(WORD_START, " ").strip() == clean_text(UNSEEN)  # nothing lost
    assert source.axis_tokens[-1] == "<eos>" and source.tokens[0].startswith(WORD_START)
    # A character the training text never had is the one thing that stays unknown.
    assert any(translator.prepare("Ein Mann 😀").unknown)


def test_translation_is_detokenized_pieces_without_unk_copying(translator):
    t = translator.translate(UNSEEN)
    assert WORD_START not in t.text and t.text == t.text.strip()
    assert t.tokens == t.raw_tokens  # replace_unk never rewrites a SentencePiece model's output
    assert t.text == translator.pieces.detokenize(t.raw_tokens)
    ref = "Two men sleep on the beach."
    assert translator.detokenize(translator.target_tokens(ref)) == ref  # pieces round-trip to the raw text
    assert translator.trace(UNSEEN).trace.src_tokens == translator.prepare(UNSEEN).axis_tokens


def test_the_film_is_recorded_with_pieces_on_its_axes(three_epochs, translator):
    film = load_film(three_epochs)
    assert len(film) >= 4
    for p in film.probes:
        src_axis, tgt_axis = film.axes(film.probes.index(p), "cross")[1], p["tgt_tokens"]
        assert src_axis[-1] == "<eos>" and tgt_axis[0] == "<bos>"
        assert src_axis[:-1] == translator.prepare(p["src"]).tokens  # the pieces the model reads
        assert tgt_axis[1:] == translator.target_tokens(p["ref"])
        assert src_axis[0].startswith(WORD_START) and any(not t.startswith(WORD_START) for t in src_axis[:-1])
        assert all(WORD_START not in text for text in p["translations"])  # detokenized by SentencePiece


def test_resume_reuses_the_piece_models_and_repeats_the_run(corpus, three_epochs, tmp_path):
    out = tmp_path / "ckpt"
    assert train_cli.main(piece_args(corpus, out, 2)) == 0
    spm_bytes = (out / SRC_SPM).read_bytes()
    assert train_cli.main(piece_args(corpus, out, 3, "--resume")) == 0
    log = (out / "train.log").read_text(encoding="utf-8")
    assert log.count("SentencePiece (unigram") == 1 and "resumed after epoch 2" in log  # trained once, reused
    assert (out / SRC_SPM).read_bytes() == spm_bytes
    a, b = load_file(str(out / "model.safetensors")), load_file(str(three_epochs / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # 2 + 1 epochs == 3 straight
    Translator.from_checkpoint(out).translate(UNSEEN)


def test_resume_refuses_piece_models_that_are_not_the_states(corpus, tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert train_cli.main(piece_args(corpus, out, 1, "--no-film")) == 0
    other = train_piece_model([clean_text(en) for _, en in synthetic_corpus()], SIZE, "unigram", 0)
    (out / SRC_SPM).write_bytes(other)  # the English model where the German one was
    assert train_cli.main(piece_args(corpus, out, 2, "--resume", "--no-film")) == 2
    assert SRC_SPM in capsys.readouterr().err
    (out / SRC_SPM).unlink()
    assert train_cli.main(piece_args(corpus, out, 2, "--resume", "--no-film")) == 2
    with pytest.raises(CheckpointError, match=SRC_SPM):
        load_checkpoint(out)  # and the folder itself says which file is missing


def test_word_level_training_is_unchanged(corpus, tmp_path):
    out = tmp_path / "words"
    assert train_cli.main(train_args(corpus, out, 1, "--test-split", "", "--no-film", "--no-final-eval")) == 0
    _, sv, tv, _ = load_checkpoint(out)
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert cfg["tokenizer"] == "spacy" and not (out / SRC_SPM).exists() and not (out / TGT_SPM).exists()
    pairs = synthetic_corpus()
    assert sv.itos == Vocab.build((tokenize(de, "de") for de, _ in pairs), 1).itos  # spaCy words, as before
    assert tv.itos == Vocab.build((tokenize(en, "en") for _, en in pairs), 1).itos
    assert "pieces" not in json.loads((out / "metrics.json").read_text(encoding="utf-8"))["training"]
    assert encode_pairs(["Ein Hund läuft."], ["A dog runs."], sv, tv, 32) == [
        (sv.encode(["Ein", "Hund", "läuft", "."]) + [sv.eos_idx], tv.encode(["A", "dog", "runs", "."]))]


def test_piece_codec_reads_language_codes_only_for_marian(three_epochs):
    model = (three_epochs / SRC_SPM).read_bytes()
    ours = PieceCodec(model, model, SPECIALS, language_codes=False)
    marian = PieceCodec(model, model, SPECIALS, language_codes=True)
    assert marian.source_pieces(">>de<< Ein Mann")[0] == ">>de<<"
    assert ">>de<<" not in ours.source_pieces(">>de<< Ein Mann")  # text here, not a code
    assert ours.source_pieces("Ein <unk> Mann")[1] == "<unk>"  # a special typed in the text stays whole
    assert ours.source_pieces("") == []


def test_the_rarest_piece_is_the_one_the_piece_model_scores_lowest(translator):
    """Rare-word heads on a piece model rank pieces by their SentencePiece score, not by id."""
    from model.analysis.sentences import rarest_positions, rarity_rank

    rank = rarity_rank(translator)
    sp = translator.pieces.source  # the SentencePieceProcessor of source.spm
    tokens = translator.source_tokens(UNSEEN)
    scores = {t: sp.get_score(sp.piece_to_id(t)) for t in tokens if t.replace(WORD_START, "") not in ("", ".")}
    assert len(scores) >= 2
    rare, ok = rarest_positions(tokens, rank)
    lowest = min(scores.values())
    assert ok and rare == [t in scores and scores[t] == lowest for t in tokens]
    assert rank("<unk>") is None and rank(".") is None and rank(WORD_START) is None  # no candidates
    assert rank("▁nichtimmodell") == float("inf")  # a piece the model lacks is rarer than any

