"""A tiny random T5Gemma, built here with transformers' own T5GemmaConfig and GemmaTokenizer, saved as
save_pretrained writes it (tests/hf_support.py does the same for the other families; nothing is downloaded).

The SentencePiece model is trained on the fly as Gemma's is made: BPE with byte fallback, no dummy prefix, digits
split, <pad> <eos> <bos> <unk> at ids 0..3 and <mask> at 4; beside the saved tokenizer as tokenizer.model, the
name the hub's T5Gemma folders give it. The network is as the published checkpoints are in all but size: grouped
key/value heads (4 query heads, 2 key/value heads), sliding and full layers alternating with a window of 4 (so
that the window cuts on sentences of 20 tokens), both soft-caps, a query_pre_attn_scalar that is not head_dim and
a rotary base that is not the default.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from tests.hf_support import DE, EN, PREFIX, randomise, sentences

WINDOW = 4
MODULE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              head_dim=8, query_pre_attn_scalar=12, sliding_window=WINDOW, attn_logit_softcapping=5.0,
              final_logit_softcapping=3.0, max_position_embeddings=128, hidden_activation="gelu_pytorch_tanh",
              rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, tie_word_embeddings=False,
              pad_token_id=0, eos_token_id=1, bos_token_id=2)


def train_gemma_spm(prefix: Path) -> Path:
    """A SentencePiece model made as Gemma's (see the module docstring)."""
    import sentencepiece as spm

    lines = sentences(DE, 300, 1) + sentences(EN, 300, 2) + [PREFIX.strip()] * 20
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=400, model_type="bpe",
        hard_vocab_limit=False, minloglevel=2, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>",
        eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>", control_symbols=["<mask>"], byte_fallback=True,
        add_dummy_prefix=False, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, character_coverage=1.0)
    return prefix.with_suffix(".model")


def config(vocab_size: int, **changes):
    """T5GemmaConfig of equal encoder and decoder (layers: sliding, full), `changes` applied to both."""
    import transformers as tf

    module = {**MODULE, "vocab_size": vocab_size, "layer_types": ["sliding_attention", "full_attention"], **changes}
    return tf.T5GemmaConfig(encoder=tf.T5GemmaModuleConfig(**module), decoder=tf.T5GemmaModuleConfig(**module),
                            vocab_size=vocab_size, tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
                            bos_token_id=2)


def build_t5gemma(folder: Path, **changes) -> Path:
    """A saved tiny T5GemmaForConditionalGeneration + GemmaTokenizer in `folder`, tokenizer.model beside them. The
    tokenizer adds <bos> and no end token, as Gemma's does."""
    import torch
    import transformers as tf

    folder.mkdir(parents=True, exist_ok=True)
    work = folder.parent / f"{folder.name}-spm"
    work.mkdir(exist_ok=True)
    model_file = train_gemma_spm(work / "sp")
    shutil.copy(model_file, work / "tokenizer.model")
    tok = tf.GemmaTokenizer.from_pretrained(str(work), add_bos_token=True, add_eos_token=False)
    torch.manual_seed(0)
    model = tf.T5GemmaForConditionalGeneration(config(len(tok) + 3, **changes))  # rows past the tokenizer's
    randomise(model, 0.3)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    shutil.copy(model_file, folder / "tokenizer.model")
    return folder
