"""Tiny random Hugging Face translation models of every family, built here and saved as save_pretrained writes them.

Each is made from transformers' own config and tokenizer classes, with a SentencePiece model trained on generated
sentences (nothing is downloaded); the SentencePiece model is put beside the saved tokenizer under the name the
hub's folders give it (spiece.model, sentencepiece.bpe.model). Every parameter is drawn at random with a spread that
makes the output change from step to step, so a weight imported into the wrong place shows.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

DE = ("der die das ein eine Hund Katze Mann Frau Kind läuft spielt liest schläft im Park Schnee Haus "
      "mit einem roten blauen großen kleinen Ball Buch Wasser und sieht 1 2 3").split()
EN = ("the a dog cat man woman child runs plays reads sleeps in park snow house with red blue big small "
      "ball book water and sees 1 2 3").split()
FAMILIES = ("m2m100", "nllb", "mbart", "t5", "t5-v1.0", "t5-mt5")  # t5-mt5: mT5-small's narrow heads
LANGS = {"m2m100": ("de", "en"), "nllb": ("deu_Latn", "eng_Latn"), "mbart": ("de_DE", "en_XX"),
         "t5": ("de", "en"), "t5-v1.0": ("de", "en"), "t5-mt5": ("de", "en")}  # T5: labels only, the prompt says which
PREFIX = "translate German to English: "
NLLB_CODES = ["deu_Latn", "eng_Latn", "fra_Latn", "spa_Latn"]


def sentences(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))).capitalize() + rng.choice([".", "!", "?"])
            for _ in range(n)]


def train_spm(prefix: Path, size: int, model_type: str, **ids) -> Path:
    import sentencepiece as spm

    lines = sentences(DE, 300, 1) + sentences(EN, 300, 2) + [PREFIX.strip()] * 20
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=size,
                                   model_type=model_type, hard_vocab_limit=False, minloglevel=2, **ids)
    return prefix.with_suffix(".model")


def randomise(model, spread: float = 0.3) -> None:
    """`spread`: of the weights; T5's scores are not divided by √d_k, so its weights are drawn narrower for scores
    of the same size (and float32's rounding no larger than in the other families)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            norm = "norm" in name and p.ndim == 1
            # Norm weights near 1, small norm biases (a large one is the same vector at every position and
            # decides every step alike), the rest spread wide enough that steps differ.
            p.copy_(1 + 0.2 * noise if norm and name.endswith("weight") else (0.05 if norm else spread) * noise)
        bias = getattr(model, "final_logits_bias", None)
        if bias is not None:
            bias.copy_(0.1 * torch.randn(bias.shape, generator=gen))


def _tokenizer(family: str, work: Path):
    import transformers as tf

    if family == "m2m100":
        model = train_spm(work / "sp", 90, "unigram")
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(model))
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i)
                  and not sp.is_unknown(i)]
        vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"] + pieces)}
        (work / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        return tf.M2M100Tokenizer(str(work / "vocab.json"), str(model), src_lang="de", tgt_lang="en"), model
    kind = "bpe" if family == "nllb" else "unigram"
    # T5's own layout: <pad> 0, </s> 1, <unk> 2, no <s>; the fairseq families' models keep SentencePiece's.
    t5_ids = dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1) if family.startswith("t5") else {}
    model = train_spm(work / "sp", 90, kind, **t5_ids)
    name = "spiece.model" if family.startswith("t5") else "sentencepiece.bpe.model"
    shutil.copy(model, work / name)
    if family == "nllb":
        return tf.NllbTokenizer.from_pretrained(str(work), src_lang="deu_Latn", tgt_lang="eng_Latn",
                                                extra_special_tokens=NLLB_CODES), model
    if family == "mbart":
        return tf.MBart50Tokenizer.from_pretrained(str(work), src_lang="de_DE", tgt_lang="en_XX"), model
    return tf.T5Tokenizer.from_pretrained(str(work), extra_ids=4), model


def _model(family: str, vocab_size: int):
    import transformers as tf

    size = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128, vocab_size=vocab_size,
                pad_token_id=1, eos_token_id=2, bos_token_id=0, decoder_start_token_id=2, scale_embedding=True)
    # A generator of its own (T5 v1.0 has the tied one): at random, a tied generator writes the token it just read
    # again and again, and varied output is what shows a misplaced weight.
    if family in ("m2m100", "nllb"):
        return tf.M2M100ForConditionalGeneration(tf.M2M100Config(**size, tie_word_embeddings=False))
    if family == "mbart":
        return tf.MBartForConditionalGeneration(tf.MBartConfig(**size, activation_function="gelu",
                                                               tie_word_embeddings=False))
    if family == "t5-mt5":  # as mT5-small and MADLAD-400: heads of d_kv 4, so h · d_kv = 16 is not d_model 32
        return tf.MT5ForConditionalGeneration(tf.MT5Config(
            vocab_size=vocab_size, d_model=32, d_kv=4, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
            relative_attention_num_buckets=8, relative_attention_max_distance=20, feed_forward_proj="gated-gelu",
            tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0))
    v10 = family == "t5-v1.0"
    cfg = tf.T5Config(vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=20,
                      feed_forward_proj="relu" if v10 else "gated-gelu", tie_word_embeddings=v10, pad_token_id=0,
                      eos_token_id=1, decoder_start_token_id=0)
    return tf.T5ForConditionalGeneration(cfg)


def build(family: str, folder: Path) -> Path:
    """A saved tiny model + tokenizer of `family` (one of FAMILIES) in `folder`, its SentencePiece model beside."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    work = folder.parent / f"{folder.name}-spm"
    work.mkdir(exist_ok=True)
    tok, spm_model = _tokenizer(family, work)
    torch.manual_seed(0)
    ids = list(tok.get_vocab().values()) + list(getattr(tok, "lang_token_to_id", {}).values())
    n = max(max(ids), len(tok) - 1) + 1  # M2M100's len() and vocabulary leave its language tokens out
    model = _model(family, n + 3)  # a few rows past the tokenizer, as real models round their size up
    randomise(model, 0.2 if family.startswith("t5") else 0.3)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    name = "spiece.model" if family.startswith("t5") else "sentencepiece.bpe.model"
    if not (folder / name).is_file():
        shutil.copy(spm_model, folder / name)
    return folder


def import_args(family: str) -> dict:
    src, tgt = LANGS[family]
    return {"src_lang": src, "tgt_lang": tgt, "prefix": PREFIX if family.startswith("t5") else None}


def assert_same_greedy(tr, ours, seq: list[int], what) -> list[int]:
    """Our greedy Translation `ours` is generate()'s `seq` (its start token first): the same tokens, and ended by the
    end token in both or cut by the same length limit (`finished`). Returns their tokens after the start token."""
    assert seq[0] == tr.cfg.decoder_start_idx, what
    theirs = seq[1:]
    ended = bool(theirs) and theirs[-1] == tr.cfg.eos_idx
    assert ours.finished == ended, what
    assert tr.tgt_vocab.encode(ours.raw_tokens) == (theirs[:-1] if ended else theirs), what
    return theirs
