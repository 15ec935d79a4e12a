"""Published models' shapes with random weights, for bench_model.py --opus-size and --families and bench_pages.py
--shape: each built as a checkpoint folder as the importer writes one (nothing is downloaded; the shapes are written
down from the models' config.json).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

from common import distinct_sentences

# Published models' shapes, from their config.json on the Hugging Face hub (written down: nothing is downloaded), for
# bench_model.py --opus-size and --families and bench_pages.py --shape, which build them with random weights.
OPUS_SHAPE = dict(src_vocab_size=58_000, tgt_vocab_size=58_000, d_model=512, n_heads=8, n_encoder_layers=6,
                  n_decoder_layers=6, d_ff=2048, max_len=512, dropout=0.1, attn_dropout=0.0, norm_first=False,
                  tie_weights=True, pad_idx=57_999, activation="swish", pe_layout="sin_then_cos", scale_embedding=True,
                  share_embeddings=True, final_logits_bias=True, decoder_start_idx=57_999, eos_idx=0)  # Marian's
BART = dict(d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16, decoder_attention_heads=16,
            encoder_ffn_dim=4096, decoder_ffn_dim=4096, scale_embedding=True, max_position_embeddings=1024,
            pad_token_id=1, eos_token_id=2, decoder_start_token_id=2)  # shared (dropouts left out: eval runs none)
HF_SHAPES = {  # facebook/nllb-200-distilled-600M, facebook/mbart-large-50, google/flan-t5-base
    "nllb-600m": BART | dict(model_type="m2m_100", vocab_size=256_206, activation_function="relu"),
    "mbart-large-50": BART | dict(model_type="mbart", vocab_size=250_054, activation_function="gelu"),
    "flan-t5-base": dict(model_type="t5", d_model=768, d_kv=64, num_heads=12, d_ff=2048, num_layers=12,
                         num_decoder_layers=12, vocab_size=32_128, feed_forward_proj="gated-gelu",
                         dense_act_fn="gelu_new", is_gated_act=True, tie_word_embeddings=False,
                         relative_attention_num_buckets=32, relative_attention_max_distance=128,
                         layer_norm_epsilon=1e-6, n_positions=512, pad_token_id=0, eos_token_id=1,
                         decoder_start_token_id=0)}
# facebook/wmt19-de-en (FSMT); google/t5gemma-s-s-* and -b-b-* (gemma.cpp's T5Gemma_S_S; the paper's B), whose encoder
# and decoder are alike: Gemma's 256k vocabulary, local (4096) and global layers in turn, both soft-caps
GEMMA = dict(vocab_size=256_000, max_position_embeddings=8192, sliding_window=4096, attn_logit_softcapping=50.0,
             final_logit_softcapping=30.0, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", head_dim=64,
             query_pre_attn_scalar=64, rope_theta=10000.0, attention_bias=False)
HF_SHAPES |= {"fsmt-wmt19-de-en": dict(
    model_type="fsmt", d_model=1024, encoder_layers=6, decoder_layers=6, encoder_attention_heads=16,
    decoder_attention_heads=16, encoder_ffn_dim=8192, decoder_ffn_dim=8192, src_vocab_size=42_024,
    tgt_vocab_size=42_024, max_position_embeddings=1024, scale_embedding=True, activation_function="relu",
    pad_token_id=1, eos_token_id=2, decoder_start_token_id=2, tie_word_embeddings=False)} | {
    f"t5gemma-{s}-{s}": dict(model_type="t5gemma", pad_token_id=0, eos_token_id=1, decoder_start_token_id=2, **{
        side: GEMMA | dict(hidden_size=d, intermediate_size=ff, num_hidden_layers=n, num_attention_heads=h,
                           num_key_value_heads=h) for side in ("encoder", "decoder")})
    for s, d, ff, n, h in (("s", 512, 1024, 8, 8), ("b", 768, 2048, 12, 12))}
SHAPES = ["opus-mt-de-en", *HF_SHAPES]
# A vocabulary: the family's specials at their ids, caption pieces, fillers, a few language tokens and <mask> last.
HEADS = {"marian": ["</s>", "<unk>"], "t5": ["<pad>", "</s>", "<unk>"],
         "t5gemma": ["<pad>", "<eos>", "<bos>", "<unk>"]}  # mBART's, NLLB's, FSMT's: <s> <pad> </s> <unk>
LANGS = {"m2m100": ["deu_Latn", "eng_Latn", "fra_Latn", "spa_Latn"], "mbart": ["de_DE", "en_XX", "fr_XX", "es_XX"]}
T5_PROMPT = "translate German to English: "


class GemmaFraming:
    """Gemma's tokenizer as hf_t5gemma.config_fields asks it how a source is framed: <bos> first, no end token."""

    bos_token_id, eos_token_id = 2, 1

    def __call__(self, text: str) -> dict:
        return {"input_ids": [2, 100]}


def family_fields(hf: dict, family: str) -> dict:
    """The ModelConfig fields of a published config (HF_SHAPES), as model/io's family modules read it; read here by
    SentencePiece (FSMT's Moses + BPE and Gemma's own model cost the same work per piece)."""
    from model.io import hf_families as fam

    if family == "fsmt":
        from model.io.hf_fsmt import fsmt_config

        return fsmt_config(hf) | dict(src_vocab_size=hf["src_vocab_size"], tgt_vocab_size=hf["tgt_vocab_size"],
                                      tie_weights=hf["tie_word_embeddings"])
    if family == "t5gemma":
        from model.io.hf_t5gemma import config_fields

        return config_fields(hf, GemmaFraming()) | dict(
            src_vocab_size=hf["encoder"]["vocab_size"], tgt_vocab_size=hf["encoder"]["vocab_size"],
            share_embeddings=True, tie_weights=True)
    return (fam.t5_config(hf) if family == "t5" else fam.bart_like_config(hf, family)) | dict(
        src_vocab_size=hf["vocab_size"], tgt_vocab_size=hf["vocab_size"], share_embeddings=True,
        tie_weights=hf.get("tie_word_embeddings", True), src_prefix=T5_PROMPT * (family == "t5"))


def build_shape(folder: Path, name: str = "opus-mt-de-en") -> int:
    """A checkpoint folder of a published shape (OPUS_SHAPE, or HF_SHAPES through model/io/hf_families.py) with random
    float32 weights, as the importer writes one, with a SentencePiece model trained on captions; its parameters."""
    import sentencepiece as spm
    import torch

    from model.io import hf_families as fam
    from model.io.checkpoint import LANGUAGES, SRC_SPM, TGT_SPM, save_checkpoint
    from model.nn.config import ModelConfig
    from model.nn.transformer import EncoderDecoder, parameter_counts
    from model.text.vocab import Vocab

    folder.mkdir(parents=True, exist_ok=True)
    written = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(distinct_sentences(3000)), model_writer=written,
                                   vocab_size=2000, hard_vocab_limit=False, minloglevel=2)
    for spm_name in (SRC_SPM, TGT_SPM):  # German both sides: only the shapes and the work matter here
        (folder / spm_name).write_bytes(written.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=written.getvalue())
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    hf, family, fields = HF_SHAPES.get(name), "marian", dict(OPUS_SHAPE)
    if hf is not None:
        family = fam.family_of(hf)
        fields = family_fields(hf, family)
    codes = LANGS.get(family, [])
    head = HEADS.get(family, ["<s>", "<pad>", "</s>", "<unk>"])
    tail = codes + ["<mask>"] if codes else ["<pad>"] if family == "marian" else []
    fill = fields["tgt_vocab_size"] - len(head) - len(pieces) - len(tail)
    itos = head + pieces + [f"\u2581filler{i}" for i in range(fill)] + tail
    vocab = Vocab(itos, {"unk": "<unk>", "pad": "<pad>", "bos": itos[fields["decoder_start_idx"]],
                         "eos": itos[fields["eos_idx"]]})
    cfg = ModelConfig(**fields | dict(tokenizer="sentencepiece"), src_lang=(codes or ["de"])[0],
                      tgt_lang=(codes[1:] or ["en"])[0])
    assert (vocab.pad_idx, vocab.eos_idx) == (cfg.pad_idx, cfg.eos_idx), f"{name}: the specials' ids differ"
    torch.manual_seed(0)
    model = EncoderDecoder(cfg)
    params = int(sum(parameter_counts(model).values()))
    save_checkpoint(folder, model, vocab, vocab, {"model": {"parameters": params, "config": cfg.to_dict()},
        "imported": {"family": family, "source": f"random weights of {name}'s shape (benchmarks/common.py)"},
        "note": f"random weights, {name}'s shape (a benchmark): its translations mean nothing"})
    if codes:
        (folder / LANGUAGES).write_text(json.dumps({c: c for c in codes}) + "\n", encoding="utf-8")
    return params
