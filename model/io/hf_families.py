"""What each Hugging Face translation family is, in our one config, and where its weights go in our network.

    family      model_type   class                               what differs from today's model
    m2m100      m2m_100      M2M100ForConditionalGeneration      pre-norm, final norms, fairseq sines from row 2,
                                                                 language tokens (M2M100 and NLLB-200)
    mbart       mbart        MBartForConditionalGeneration       learned positions from row 2, an embedding norm,
                                                                 GELU, language tokens (mBART-50)
    t5          t5, mt5      T5ForConditionalGeneration          RMSNorm, relative-position bias, no score scaling,
                                                                 no biases, gated GELU (v1.1, mT5, Flan-T5, MADLAD)

Marian keeps its own importer (model/io/import_marian.py). Each function here reads a saved config.json (a dict) and
refuses, with ImportRefused naming the field, what our network cannot run exactly.
"""
from __future__ import annotations

import torch

from model.io.import_marian import ImportRefused, _layer_map
from model.nn.config import ACTIVATIONS

FAMILIES = {"marian": "marian", "m2m_100": "m2m100", "mbart": "mbart", "t5": "t5", "mt5": "t5"}
CLASSES = {"marian": "MarianMTModel", "m2m100": "M2M100ForConditionalGeneration",
           "mbart": "MBartForConditionalGeneration", "t5": "T5ForConditionalGeneration"}
T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new",
                  "silu": "silu", "swish": "swish"}


def class_name(hf: dict) -> str:
    """The transformers class that reads the saved model (mT5 has its own, the same network as T5's)."""
    return "MT5ForConditionalGeneration" if hf.get("model_type") == "mt5" else CLASSES[family_of(hf)]


def family_of(hf: dict) -> str:
    """Our family name for a saved config's model_type, or one line naming the supported ones."""
    kind = hf.get("model_type")
    if kind not in FAMILIES:
        names = ", ".join(sorted(FAMILIES))
        raise ImportRefused(f"model_type {kind!r} is not supported: supported model types are {names} "
                            "(Marian, M2M100 and NLLB-200, mBART-50, T5, mT5, Flan-T5 and MADLAD-400)")
    return FAMILIES[kind]


def _one(hf: dict, a: str, b: str) -> int:
    if hf.get(a) != hf.get(b):
        raise ImportRefused(f"{a} ({hf.get(a)}) differs from {b} ({hf.get(b)}): one value serves both stacks here")
    return int(hf[a])


def _ids(hf: dict) -> dict:
    out = {}
    for key, ours in (("pad_token_id", "pad_idx"), ("eos_token_id", "eos_idx"),
                      ("decoder_start_token_id", "decoder_start_idx")):
        if not isinstance(hf.get(key), int):
            raise ImportRefused(f"{key} must be one integer, got {hf.get(key)!r}")
        out[ours] = int(hf[key])
    return out


def bart_like_config(hf: dict, family: str) -> dict:
    """ModelConfig fields (without vocabularies and languages) of an M2M100/NLLB or mBART config."""
    act = hf.get("activation_function", "relu")
    if act not in ACTIVATIONS:
        raise ImportRefused(f"activation_function {act!r} is not supported (supported: {', '.join(ACTIVATIONS)})")
    heads = _one(hf, "encoder_attention_heads", "decoder_attention_heads")
    d_model = int(hf["d_model"])
    if d_model % heads:
        raise ImportRefused(f"d_model {d_model} is not divisible by encoder_attention_heads {heads}")
    ids = _ids(hf)
    learned = family == "mbart"
    return dict(
        d_model=d_model, n_heads=heads, n_encoder_layers=int(hf["encoder_layers"]),
        n_decoder_layers=int(hf["decoder_layers"]), d_ff=_one(hf, "encoder_ffn_dim", "decoder_ffn_dim"),
        dropout=float(hf.get("dropout", 0.1)), attn_dropout=float(hf.get("attention_dropout", 0.0)),
        max_len=int(hf.get("max_position_embeddings", 1024)), norm_first=True, activation=act,
        scale_embedding=bool(hf.get("scale_embedding", False)),
        final_logits_bias=learned,  # mBART's lm_head has a bias buffer; M2M100's has none
        positions="learned" if learned else "sinusoidal", pe_layout="fairseq",
        # Position i reads row i + 2: mBART's learned table has an offset of 2; M2M100's sines start at pad + 1.
        pos_offset=2 if learned else ids["pad_idx"] + 1, embed_norm=learned, lang_tokens=True, **ids)


def t5_config(hf: dict) -> dict:
    """ModelConfig fields of a T5, mT5, Flan-T5 or MADLAD-400 config."""
    gated = bool(hf.get("is_gated_act", str(hf.get("feed_forward_proj", "relu")).startswith("gated-")))
    act = hf.get("dense_act_fn") or str(hf.get("feed_forward_proj", "relu")).split("-")[-1]
    if act not in T5_ACTIVATIONS:
        raise ImportRefused(f"dense_act_fn {act!r} is not supported (supported: {', '.join(T5_ACTIVATIONS)})")
    d_model, heads, d_kv = int(hf["d_model"]), int(hf["num_heads"]), int(hf["d_kv"])
    n_layers = int(hf["num_layers"])
    # T5 v1.0 multiplies the decoder's output by d_model^-0.5 before its tied generator; transformers 5 says so in
    # scale_decoder_outputs, earlier versions by tie_word_embeddings. mT5 (untied) never does in transformers 5.
    tied = hf.get("tie_word_embeddings", True) is not False and hf.get("model_type") != "mt5"
    scale = hf.get("scale_decoder_outputs", tied)
    return dict(
        d_model=d_model, n_heads=heads, n_encoder_layers=n_layers,
        n_decoder_layers=int(hf.get("num_decoder_layers") or n_layers), d_ff=int(hf["d_ff"]),
        dropout=float(hf.get("dropout_rate", 0.1)), attn_dropout=float(hf.get("dropout_rate", 0.1)),
        max_len=int(hf.get("n_positions", 512)), norm_first=True, activation=T5_ACTIVATIONS[act],
        scale_embedding=False, final_logits_bias=False, norm="rms",
        norm_eps=float(hf.get("layer_norm_epsilon", 1e-6)), positions="relative",
        rel_buckets=int(hf.get("relative_attention_num_buckets", 32)),
        rel_max_distance=int(hf.get("relative_attention_max_distance", 128)), scale_attention=False,
        ff_gated=gated, bias=False, generator_scale=d_model ** -0.5 if scale else 1.0,
        d_head=0 if heads * d_kv == d_model else d_kv, **_ids(hf))  # mT5-small, MADLAD-400: h · d_kv ≠ d_model


def bart_like_weights(theirs: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """Our state dict from an M2M100ForConditionalGeneration's or MBartForConditionalGeneration's."""
    ours = {a: theirs[b] for a, b in _layer_map(cfg.n_encoder_layers, cfg.n_decoder_layers).items()}
    for side, stack in (("encoder", "src"), ("decoder", "tgt")):
        for p in ("weight", "bias"):
            ours[f"{side}_final_ln.{p}"] = theirs[f"model.{side}.layer_norm.{p}"]
            if cfg.embed_norm:
                ours[f"{stack}_embed.norm.{p}"] = theirs[f"model.{side}.layernorm_embedding.{p}"]
        if cfg.positions == "learned":
            ours[f"{stack}_embed.pos.weight"] = theirs[f"model.{side}.embed_positions.weight"]
    if cfg.final_logits_bias:
        ours["generator.proj.bias"] = theirs["final_logits_bias"].reshape(-1)  # (1, V) buffer -> the bias
    return ours


def t5_weights(theirs: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """Our state dict from a T5ForConditionalGeneration's (T5 v1.0 and v1.1, mT5, Flan-T5, MADLAD-400)."""
    ours = {}
    attn = {"w_q": "q", "w_k": "k", "w_v": "v", "w_o": "o"}
    ff = ({"w_gate": "wi_0", "w_1": "wi_1", "w_2": "wo"} if cfg.ff_gated else {"w_1": "wi", "w_2": "wo"})
    for side, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(n):
            block, mine = f"{side}.block.{i}.layer", f"{side}.{i}"
            subs = [("attn", "SelfAttention")] + ([("cross_attn", "EncDecAttention")] if side == "decoder" else [])
            for j, (a, b) in enumerate(subs):
                for x, y in attn.items():
                    ours[f"{mine}.{a}.{x}.weight"] = theirs[f"{block}.{j}.{b}.{y}.weight"]
                ours[f"{mine}.sub.{j}.norm.weight"] = theirs[f"{block}.{j}.layer_norm.weight"]
            j = len(subs)
            for x, y in ff.items():
                ours[f"{mine}.mlp.{x}.weight"] = theirs[f"{block}.{j}.DenseReluDense.{y}.weight"]
            ours[f"{mine}.sub.{j}.norm.weight"] = theirs[f"{block}.{j}.layer_norm.weight"]
        # The bias table lives in the first block and serves every layer of its stack.
        bias = f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        ours[f"{'src' if side == 'encoder' else 'tgt'}_pos_bias.bias.weight"] = theirs[bias]
        ours[f"{side}_final_ln.weight"] = theirs[f"{side}.final_layer_norm.weight"]
    return ours


def embeddings(theirs: dict[str, torch.Tensor], prefix: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(encoder, decoder, lm_head) matrices; a saved model may store only the shared one."""
    shared = theirs.get(f"{prefix}shared.weight")
    enc = theirs.get(f"{prefix}encoder.embed_tokens.weight", shared)
    dec = theirs.get(f"{prefix}decoder.embed_tokens.weight", shared)
    if enc is None or dec is None:
        raise ImportRefused("the weights hold no token embeddings (shared.weight or embed_tokens.weight)")
    return enc, dec, theirs.get("lm_head.weight", dec)


def convert(theirs: dict[str, torch.Tensor], cfg, family: str) -> dict[str, torch.Tensor]:
    """Our state dict (each shared tensor once) from a model's state dict, in float32."""
    theirs = {k: v.detach().float().cpu() for k, v in theirs.items()}
    ours = t5_weights(theirs, cfg) if family == "t5" else bart_like_weights(theirs, cfg)
    enc, dec, head = embeddings(theirs, "" if family == "t5" else "model.")
    ours["src_embed.lut.weight"] = enc
    if not cfg.share_embeddings:
        ours["tgt_embed.lut.weight"] = dec
    if not cfg.tie_weights:
        ours["generator.proj.weight"] = head
    return ours


def sharing(theirs: dict[str, torch.Tensor], family: str) -> dict[str, bool]:
    """share_embeddings and tie_weights as the weights have them (the real checkpoints share and tie; a config
    may say otherwise, and transformers' versions have tied differently)."""
    enc, dec, head = embeddings(theirs, "" if family == "t5" else "model.")
    return {"share_embeddings": bool(torch.equal(enc, dec)), "tie_weights": bool(torch.equal(head, dec))}
