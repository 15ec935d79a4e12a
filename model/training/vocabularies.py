"""The training corpus as ids: the vocabularies (spaCy words, or SentencePiece pieces) and the encoded pairs.

SentencePiece models are trained on the training split only and written before epoch 1, so that --resume and
the checkpoint use these very ones; on resume they are read back and checked against the saved vocabularies.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from model.io.checkpoint import SRC_SPM, TGT_SPM, CheckpointError
from model.nn.config import ModelConfig
from model.text.pieces import PieceCodec, train_piece_model, vocab_of
from model.text.tokenize import clean_text, tokenize
from model.text.vocab import Vocab


def word_split(src_lang: str = "de", tgt_lang: str = "en"):
    """(source, target) sentence -> spaCy words."""
    return (lambda s: tokenize(s, src_lang)), (lambda t: tokenize(t, tgt_lang))


def piece_split(codec: PieceCodec):
    """(source, target) sentence -> SentencePiece pieces of the text the app would read (cleaned)."""
    return (lambda s: codec.source_pieces(clean_text(s))), (lambda t: codec.target_pieces(clean_text(t)))


def encode_pairs(src_lines, tgt_lines, sv: Vocab, tv: Vocab, max_len: int, split=None):
    """(source ids + <eos>, target ids) per pair, cut so that the decoder's <bos>/<eos> fit within max_len."""
    split_src, split_tgt = split or word_split()
    pairs = []
    for s, t in zip(src_lines, tgt_lines):
        a = sv.encode(split_src(s))[: max_len - 1] + [sv.eos_idx]
        b = tv.encode(split_tgt(t))[: max_len - 2]
        pairs.append((a, b))
    return pairs


def build_piece_models(out: Path, train_src, train_tgt, args, write: bool) -> tuple[PieceCodec, Vocab, Vocab]:
    """Train the source and target SentencePiece models on the training split only and write them to
    OUT/source.spm and OUT/target.spm before epoch 1 (so --resume and the checkpoint use these very ones).

    Every rank trains them (deterministic: the same bytes), only the writing one (rank 0) stores them.
    """
    models = [train_piece_model([clean_text(x) for x in lines], args.spm_vocab_size, args.spm_model_type, args.seed)
              for lines in (train_src, train_tgt)]
    if write:
        out.mkdir(parents=True, exist_ok=True)
        for name, model in zip((SRC_SPM, TGT_SPM), models):
            (out / (name + ".tmp")).write_bytes(model)
            os.replace(out / (name + ".tmp"), out / name)
    sv, tv = vocab_of(models[0]), vocab_of(models[1])
    return PieceCodec(*models, {t for v in (sv, tv) for t in v.specials.values()}, language_codes=False), sv, tv


def read_piece_models(out: Path, sv: Vocab, tv: Vocab) -> PieceCodec:
    """On resume: the .spm files written before epoch 1, checked against the vocabularies in the state."""
    for name, vocab in ((SRC_SPM, sv), (TGT_SPM, tv)):
        path = out / name
        try:
            same = path.is_file() and vocab_of(path.read_bytes()).itos == vocab.itos
        except (OSError, RuntimeError, ValueError) as e:
            raise CheckpointError(f"{path}: is not a SentencePiece model of ours ({e}). "
                                  "Start again without --resume.") from e
        if not same:
            raise CheckpointError(f"{path}: missing, or its pieces are not the vocabulary in "
                                  f"{out / 'train' / 'state.pt'}. Start again without --resume.")
    return PieceCodec(out / SRC_SPM, out / TGT_SPM, {t for v in (sv, tv) for t in v.specials.values()},
                      language_codes=False)


def new_vocabularies(out: Path, train_src, train_tgt, args, write: bool, log) -> tuple[PieceCodec | None, Vocab, Vocab]:
    """A fresh run's (SentencePiece codec or None, source vocabulary, target vocabulary) from the training split."""
    if args.tokenizer == "sentencepiece":
        t_spm = time.time()
        codec, sv, tv = build_piece_models(out, train_src, train_tgt, args, write)
        log(f"SentencePiece ({args.spm_model_type}, {args.spm_vocab_size} asked) trained on the training split "
            f"in {time.time() - t_spm:.1f} s: {out / SRC_SPM}, {out / TGT_SPM}")
        return codec, sv, tv
    sv = Vocab.build((tokenize(s, "de") for s in train_src), args.min_freq)
    tv = Vocab.build((tokenize(t, "en") for t in train_tgt), args.min_freq)
    return None, sv, tv


def saved_vocabularies(state: dict, out: Path) -> tuple[PieceCodec | None, Vocab, Vocab, ModelConfig]:
    """A resumed run's (codec or None, vocabularies, config) from its training state; CheckpointError when the
    .spm files no longer match it."""
    sv, tv = Vocab(state["src_itos"]), Vocab(state["tgt_itos"])
    cfg = ModelConfig.from_dict(state["config"])
    codec = read_piece_models(out, sv, tv) if cfg.tokenizer == "sentencepiece" else None
    return codec, sv, tv, cfg
