"""A tiny random FSMT (fairseq's WMT19 transformer, FSMTForConditionalGeneration), saved as save_pretrained writes it.

Made from transformers' own FSMTConfig and FSMTTokenizer, with the tokenizer's three files learnt here (nothing is
downloaded): byte-pair merges learnt on the German and English words of tests/hf_support.py as Moses cuts them
(merges.txt, "left right count" a line, the end of a word marked </w>), and a vocabulary per side in fairseq's
layout (<s> <pad> </s> <unk>, then the pieces of that side's sentences, most frequent first; a piece seen once is
left out, so that some words are read with <unk>), written as FSMT's conversion writes them: a continuing piece bare,
a word's last piece with </w>. Parameters are drawn as tests/hf_support.py's randomise draws them.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tests.hf_support import DE, EN, randomise, sentences

LANGS = ("de", "en")
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's dictionary: ids 0..3
MERGES = 150


def moses_words(lines: list[str], lang: str) -> list[str]:
    """The words FSMTTokenizer's Moses pipeline gives for these lines."""
    from model.text.moses_bpe import moses_words as words

    return [w for line in lines for w in words(line, lang)]


def merge(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    out, i = [], 0
    while i < len(word):
        if word[i : i + 2] == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def learn_bpe(words: Counter, n_merges: int) -> list[tuple[str, str, int]]:
    """(left, right, count) merges, most frequent pair first (ties: the larger pair), as subword-nmt learns them."""
    spelled = Counter()
    for w, c in words.items():
        spelled[tuple(w[:-1]) + (w[-1] + "</w>",)] += c
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for word, c in spelled.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append((*best, pairs[best]))
        new = Counter()
        for word, c in spelled.items():
            new[merge(word, best)] += c
        spelled = new
    return merges


def write_tokenizer_files(folder: Path) -> Path:
    """vocab-src.json, vocab-tgt.json and merges.txt of a German -> English tokenizer in `folder`."""
    import transformers as tf

    folder.mkdir(parents=True, exist_ok=True)
    de, en = sentences(DE, 300, 1), sentences(EN, 300, 2)
    words = Counter(moses_words(de, "de") + moses_words(en, "en"))
    merges = learn_bpe(words, MERGES)
    (folder / "merges.txt").write_text("".join(f"{a} {b} {c}\n" for a, b, c in merges), encoding="utf-8")
    placeholder = {t: i for i, t in enumerate(SPECIALS)}
    for name in ("vocab-src.json", "vocab-tgt.json"):
        (folder / name).write_text(json.dumps(placeholder), encoding="utf-8")
    reader = tf.FSMTTokenizer(langs=list(LANGS), src_vocab_file=str(folder / "vocab-src.json"),
                              tgt_vocab_file=str(folder / "vocab-tgt.json"), merges_file=str(folder / "merges.txt"))
    for name, lines in (("vocab-src.json", de), ("vocab-tgt.json", en)):
        counts = Counter(p for line in lines for p in reader.tokenize(line))
        kept = sorted((p for p, c in counts.items() if c > 1), key=lambda p: (-counts[p], p))
        vocab = {t: i for i, t in enumerate(list(SPECIALS) + kept)}
        (folder / name).write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return folder


def tokenizer(folder: Path, **kwargs):
    """FSMTTokenizer of the files in `folder` (kwargs: do_lower_case, langs)."""
    import transformers as tf

    kwargs.setdefault("langs", list(LANGS))
    files = {f"{k}_file": str(folder / n) for k, n in (("src_vocab", "vocab-src.json"), ("tgt_vocab", "vocab-tgt.json"),
                                                        ("merges", "merges.txt"))}
    return tf.FSMTTokenizer(**files, **kwargs)


def build_fsmt(folder: Path, tie: bool = False) -> Path:
    """A saved tiny FSMT (d_model 32, 4 heads, 2 + 2 layers) and its tokenizer in `folder`."""
    import torch
    import transformers as tf

    tok = tokenizer(write_tokenizer_files(folder.parent / f"{folder.name}-bpe"))
    cfg = tf.FSMTConfig(langs=list(LANGS), src_vocab_size=len(tok.encoder), tgt_vocab_size=len(tok.decoder),
                        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
                        tie_word_embeddings=tie, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        decoder_start_token_id=2)
    torch.manual_seed(0)
    model = tf.FSMTForConditionalGeneration(cfg)
    randomise(model, 0.2)  # post-norm at 0.3 writes one token again and again: varied output shows a misplaced weight
    with torch.no_grad():  # the sines are no parameter to draw: FSMT computes them
        for side in (model.model.encoder, model.model.decoder):
            table = side.embed_positions
            table.weight.copy_(table.get_embedding(*table.weight.shape, table.padding_idx))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
