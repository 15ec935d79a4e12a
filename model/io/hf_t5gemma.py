"""T5Gemma (Google, 2025: Gemma 2's layers as an encoder and a decoder) in our one config, and where its weights go.

    family     model_type   class                               what differs from today's model
    t5gemma    t5gemma      T5GemmaForConditionalGeneration     Gemma's RMSNorm (× (1 + w)) before and after every
                                                                sub-layer, rotary positions, grouped key/value
                                                                heads, sliding windows on alternate layers (the
                                                                encoder's both ways), soft-capped scores and
                                                                logits, scores × query_pre_attn_scalar^-0.5, gated
                                                                GELU (tanh), embeddings × √d_model, no biases;
                                                                Gemma's SentencePiece (tokenizer.model): the source
                                                                starts with <bos> and has no end token

A saved T5GemmaConfig holds an `encoder` and a `decoder` T5GemmaModuleConfig. What our network keeps once for both
stacks must be equal in them (widths, heads, norms, caps, rotary base); their layer counts and windows may differ.
Anything else is refused with ImportRefused naming the field. model/io/import_hf.py runs these functions.
"""
from __future__ import annotations

import torch

from model.io.hf_families import T5_ACTIVATIONS, ImportRefused, with_embeddings

# T5GemmaModuleConfig's defaults (transformers 5), for a config.json that leaves a key out
MODULE_DEFAULTS = {"num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
                   "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "attention_bias": False,
                   "query_pre_attn_scalar": 256, "sliding_window": 4096, "final_logit_softcapping": 30.0,
                   "attn_logit_softcapping": 50.0}
# What one value of our config serves in both stacks
SAME = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
        "hidden_activation", "rms_norm_eps", "query_pre_attn_scalar", "attn_logit_softcapping", "vocab_size",
        "rope_theta")
LAYER_TYPES = {"sliding_attention", "full_attention"}
# Our sub-layer -> T5Gemma's module names: the pre-norm (sub.{n}.norm), the post-norm ({sub-layer}_post_ln)
NORMS = {"attn": ("pre_self_attn_layernorm", "post_self_attn_layernorm"),
         "cross_attn": ("pre_cross_attn_layernorm", "post_cross_attn_layernorm"),
         "mlp": ("pre_feedforward_layernorm", "post_feedforward_layernorm")}
PROJ = {"w_q": "q_proj", "w_k": "k_proj", "w_v": "v_proj", "w_o": "o_proj"}
MLP = {"w_gate": "gate_proj", "w_1": "up_proj", "w_2": "down_proj"}


def _module(hf: dict, side: str) -> dict:
    """The encoder's or decoder's config with the defaults filled in and the rotary base read from either way a
    config.json has stored it; ImportRefused for what we cannot run."""
    got = hf.get(side)
    if not isinstance(got, dict):
        raise ImportRefused(f"{side} must be the {side}'s T5GemmaModuleConfig (a dict), got {type(got).__name__}")
    m = {**MODULE_DEFAULTS, **got}
    m["head_dim"] = m["head_dim"] or int(m["hidden_size"]) // int(m["num_attention_heads"])
    rope = m.get("rope_parameters") or m.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise ImportRefused(f"{side}.rope_parameters.rope_type {rope.get('rope_type')!r} is not supported: rotary "
                            "positions here are the default ones")
    m["rope_theta"] = float(rope.get("rope_theta", m.get("rope_theta", 10000.0)))
    n = int(m["num_hidden_layers"])
    types = m.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if len(types) != n or set(types) - LAYER_TYPES:
        raise ImportRefused(f"{side}.layer_types {types!r} is not supported: {n} of sliding_attention or "
                            "full_attention")
    if "sliding_attention" in types and not m.get("sliding_window"):
        raise ImportRefused(f"{side}.sliding_window is {m.get('sliding_window')!r} but {side} has sliding layers")
    m["layer_types"] = types
    if m["attention_bias"]:
        raise ImportRefused(f"{side}.attention_bias = true is not supported: T5Gemma here has no biases")
    if m["hidden_activation"] not in T5_ACTIVATIONS:
        raise ImportRefused(f"{side}.hidden_activation {m['hidden_activation']!r} is not supported "
                            f"(supported: {', '.join(T5_ACTIVATIONS)})")
    return m


def modules(hf: dict) -> tuple[dict, dict]:
    """(encoder, decoder) configs, or ImportRefused naming a field our one config cannot hold for both."""
    enc, dec = _module(hf, "encoder"), _module(hf, "decoder")
    for key in SAME:
        if enc.get(key) != dec.get(key):
            raise ImportRefused(f"encoder.{key} ({enc.get(key)}) differs from decoder.{key} ({dec.get(key)}): one "
                                "value serves both stacks here")
    cross = dec.get("cross_attention_hidden_size") or enc["hidden_size"]
    if cross != dec["hidden_size"]:
        raise ImportRefused(f"decoder.cross_attention_hidden_size ({cross}) differs from decoder.hidden_size "
                            f"({dec['hidden_size']}): one width serves both stacks here")
    if hf.get("vocab_size", enc["vocab_size"]) != enc["vocab_size"]:
        raise ImportRefused(f"vocab_size ({hf['vocab_size']}) differs from encoder.vocab_size ({enc['vocab_size']})")
    return enc, dec


def with_ids(hf: dict) -> dict:
    """The config with the three ids the importer reads as one integer each: pad_token_id, eos_token_id (the first
    where generation stops at several: the tokenizer's <eos>) and decoder_start_token_id (the decoder's <bos>, as
    generate() and _shift_right start from)."""
    _, dec = modules(hf)
    eos = hf.get("eos_token_id", dec.get("eos_token_id"))
    start = hf.get("decoder_start_token_id")
    start = dec.get("bos_token_id", hf.get("bos_token_id")) if start is None else start
    out = {"pad_token_id": hf.get("pad_token_id", dec.get("pad_token_id")),
           "eos_token_id": eos[0] if isinstance(eos, list) and eos else eos, "decoder_start_token_id": start,
           "vocab_size": dec["vocab_size"]}
    for key, value in out.items():
        if not isinstance(value, int):
            raise ImportRefused(f"{key} must be one integer, got {value!r}")
    return {**hf, **out}


def _windows(m: dict) -> str:
    return ",".join(str(m["sliding_window"]) if t == "sliding_attention" else "0" for t in m["layer_types"])


def config_fields(hf: dict, tok) -> dict:
    """ModelConfig fields (without vocabularies and languages) of a T5GemmaConfig; `tok` (its tokenizer) says how
    a source is framed (Gemma's: <bos> first, no end token)."""
    enc, dec = modules(hf)
    d_model, heads, d_head = int(enc["hidden_size"]), int(enc["num_attention_heads"]), int(enc["head_dim"])
    kv = int(enc["num_key_value_heads"])
    if heads % kv or d_head % 2:
        raise ImportRefused(f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv}) and "
                            f"head_dim ({d_head}) even")
    probe = tok("a")["input_ids"]
    ids = with_ids(hf)
    return dict(
        d_model=d_model, n_heads=heads, n_kv_heads=0 if kv == heads else kv,
        d_head=0 if heads * d_head == d_model else d_head, n_encoder_layers=int(enc["num_hidden_layers"]),
        n_decoder_layers=int(dec["num_hidden_layers"]), d_ff=int(enc["intermediate_size"]),
        dropout=float(hf.get("dropout_rate", 0.0)), attn_dropout=float(hf.get("attention_dropout", 0.0)),
        max_len=min(int(enc["max_position_embeddings"]), int(dec["max_position_embeddings"])), norm_first=True,
        activation=T5_ACTIVATIONS[enc["hidden_activation"]], scale_embedding=True, final_logits_bias=False,
        norm="gemma_rms", norm_eps=float(enc["rms_norm_eps"]), sublayer_post_norm=True, positions="rotary",
        rope_base=enc["rope_theta"], encoder_windows=_windows(enc), decoder_windows=_windows(dec),
        attn_softcap=float(enc["attn_logit_softcapping"] or 0.0),
        final_softcap=float(dec["final_logit_softcapping"] or 0.0),
        query_pre_attn_scalar=float(enc["query_pre_attn_scalar"]), ff_gated=True, bias=False,
        src_bos=bool(probe) and probe[0] == tok.bos_token_id, src_eos=bool(probe) and probe[-1] == tok.eos_token_id,
        pad_idx=ids["pad_token_id"], eos_idx=ids["eos_token_id"], decoder_start_idx=ids["decoder_start_token_id"])


def embeddings(theirs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(encoder, decoder, lm_head) matrices; the head is the decoder's embedding where it is tied and not stored."""
    enc, dec = theirs.get("model.encoder.embed_tokens.weight"), theirs.get("model.decoder.embed_tokens.weight")
    if enc is None or dec is None:
        raise ImportRefused("the weights hold no token embeddings (model.encoder/decoder.embed_tokens.weight)")
    return enc, dec, theirs.get("lm_head.out_proj.weight", dec)


def sharing(theirs: dict[str, torch.Tensor], family: str = "t5gemma") -> dict[str, bool]:
    """share_embeddings and tie_weights as the weights have them."""
    enc, dec, head = embeddings(theirs)
    return {"share_embeddings": bool(torch.equal(enc, dec)), "tie_weights": bool(torch.equal(head, dec))}


def convert(theirs: dict[str, torch.Tensor], cfg, family: str = "t5gemma") -> dict[str, torch.Tensor]:
    """Our state dict (each shared tensor once) from a T5GemmaForConditionalGeneration's, in float32."""
    theirs = {k: v.detach().float().cpu() for k, v in theirs.items()}
    ours = {}
    for side, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        subs = ("attn", "cross_attn", "mlp") if side == "decoder" else ("attn", "mlp")
        for i in range(n):
            mine, layer = f"{side}.{i}", f"model.{side}.layers.{i}"
            for j, sub in enumerate(subs):
                pre, post = NORMS[sub]
                ours[f"{mine}.sub.{j}.norm.weight"] = theirs[f"{layer}.{pre}.weight"]
                ours[f"{mine}.{sub}_post_ln.weight"] = theirs[f"{layer}.{post}.weight"]
            for sub, module in (("attn", "self_attn"), ("cross_attn", "cross_attn"))[: len(subs) - 1]:
                for x, y in PROJ.items():
                    ours[f"{mine}.{sub}.{x}.weight"] = theirs[f"{layer}.{module}.{y}.weight"]
            for x, y in MLP.items():
                ours[f"{mine}.mlp.{x}.weight"] = theirs[f"{layer}.mlp.{y}.weight"]
        ours[f"{side}_final_ln.weight"] = theirs[f"model.{side}.norm.weight"]
    return with_embeddings(ours, cfg, *embeddings(theirs))
