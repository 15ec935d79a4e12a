"""What each Hugging Face translation family is, in our one config, and where its weights go in our network.

    family      model_type   class                               what differs from today's model
    marian      marian       MarianMTModel                       post-norm, sines then cosines, a final logits bias,
                                                                 a vocabulary (or two) of its own (opus-mt)
    m2m100      m2m_100      M2M100ForConditionalGeneration      pre-norm, final norms, fairseq sines from row 2,
                                                                 language tokens (M2M100 and NLLB-200)
    mbart       mbart        MBartForConditionalGeneration       learned positions from row 2, an embedding norm,
                                                                 GELU, language tokens (mBART-50)
    t5          t5, mt5      T5ForConditionalGeneration          RMSNorm, relative-position bias, no score scaling,
                                                                 no biases, gated GELU (v1.1, mT5, Flan-T5, MADLAD)
    fsmt        fsmt         FSMTForConditionalGeneration        post-norm, fairseq sines from row 2, Moses + BPE,
                                                                 a vocabulary per side (WMT19): model/io/hf_fsmt.py
    t5gemma     t5gemma      T5GemmaForConditionalGeneration     Gemma 2's layers: rotary positions, grouped key/value
                                                                 heads, sliding windows, soft-capping, norms after
                                                                 the sub-layers: model/io/hf_t5gemma.py

Each function here reads a saved config.json (a dict), or a Marian folder's files, and refuses, with ImportRefused
naming the field, what our network cannot run exactly. Marian's functions are the last ones (marian_*): its folder
holds its vocabularies (vocab.json) and two SentencePiece models, which the other families' tokenizers replace.
model/io/import_hf.py runs them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from model.nn.config import ACTIVATIONS, ModelConfig
from model.text.vocab import Vocab

FAMILIES = {"marian": "marian", "m2m_100": "m2m100", "mbart": "mbart", "t5": "t5", "mt5": "t5", "fsmt": "fsmt",
            "t5gemma": "t5gemma"}
CLASSES = {"marian": "MarianMTModel", "m2m100": "M2M100ForConditionalGeneration",
           "mbart": "MBartForConditionalGeneration", "t5": "T5ForConditionalGeneration",
           "fsmt": "FSMTForConditionalGeneration", "t5gemma": "T5GemmaForConditionalGeneration"}
T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new",
                  "silu": "silu", "swish": "swish"}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Keys of a saved MarianConfig that describe a model the transformers code (and ours) does not run: BART leftovers
# in old opus-mt configs. They must hold these values, or the weights belong to another architecture.
MUST_BE = {"normalize_before": False, "add_final_layer_norm": False, "normalize_embedding": False,
           "static_position_embeddings": True, "add_bias_logits": False}


class ImportRefused(Exception):
    """A source that cannot be imported; the message is one line that says why."""


def read_json(path: Path) -> dict:
    """A JSON file of the source folder, or ImportRefused naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ImportRefused(f"{path} cannot be read as JSON ({e})") from None


def class_name(hf: dict) -> str:
    """The transformers class that reads the saved model (mT5 has its own, the same network as T5's)."""
    return "MT5ForConditionalGeneration" if hf.get("model_type") == "mt5" else CLASSES[family_of(hf)]


def family_of(hf: dict) -> str:
    """Our family name for a saved config's model_type, or one line naming the supported ones."""
    kind = hf.get("model_type")
    if kind not in FAMILIES:
        names = ", ".join(sorted(FAMILIES))
        raise ImportRefused(f"model_type {kind!r} is not supported: supported model types are {names} "
                            "(Marian, M2M100 and NLLB-200, mBART-50, T5, mT5, Flan-T5 and MADLAD-400, FSMT, T5Gemma)")
    return FAMILIES[kind]


def _one(hf: dict, a: str, b: str) -> int:
    if hf.get(a) != hf.get(b):
        raise ImportRefused(f"{a} ({hf.get(a)}) differs from {b} ({hf.get(b)}): one value serves both stacks here")
    return int(hf[a])


def fairseq_shape(hf: dict, activation: str) -> tuple[str, int, int, dict]:
    """(activation, d_model, heads, our ids) of a fairseq-style config (Marian, FSMT: `activation` its default),
    or ImportRefused naming what one config of ours cannot hold: an activation the network lacks, encoder and
    decoder of different heads or widths, an id that is not one integer, d_model not divisible by the heads."""
    act = hf.get("activation_function", activation)
    if act not in ACTIVATIONS:
        raise ImportRefused(f"activation_function {act!r} is not supported (supported: {', '.join(ACTIVATIONS)})")
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        _one(hf, a, b)
    ids = _ids(hf)
    d_model, heads = int(hf["d_model"]), int(hf["encoder_attention_heads"])
    if d_model % heads:
        raise ImportRefused(f"d_model {d_model} is not divisible by encoder_attention_heads {heads}")
    return act, d_model, heads, ids


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


def layer_map(n_enc: int, n_dec: int) -> dict[str, str]:
    """Our state-dict key -> the transformers key of a BART-like layer stack (Marian, M2M100, mBART; embeddings and
    generator added by the caller)."""
    attn = {"w_q": "q_proj", "w_k": "k_proj", "w_v": "v_proj", "w_o": "out_proj"}
    out = {}
    for i in range(n_enc):
        ours, theirs = f"encoder.{i}", f"model.encoder.layers.{i}"
        parts = {**{f"attn.{a}": f"self_attn.{b}" for a, b in attn.items()},
                 "sub.0.norm": "self_attn_layer_norm", "mlp.w_1": "fc1", "mlp.w_2": "fc2",
                 "sub.1.norm": "final_layer_norm"}
        for a, b in parts.items():
            for p in ("weight", "bias"):
                out[f"{ours}.{a}.{p}"] = f"{theirs}.{b}.{p}"
    for i in range(n_dec):
        ours, theirs = f"decoder.{i}", f"model.decoder.layers.{i}"
        parts = {**{f"attn.{a}": f"self_attn.{b}" for a, b in attn.items()},
                 **{f"cross_attn.{a}": f"encoder_attn.{b}" for a, b in attn.items()},
                 "sub.0.norm": "self_attn_layer_norm", "sub.1.norm": "encoder_attn_layer_norm",
                 "mlp.w_1": "fc1", "mlp.w_2": "fc2", "sub.2.norm": "final_layer_norm"}
        for a, b in parts.items():
            for p in ("weight", "bias"):
                out[f"{ours}.{a}.{p}"] = f"{theirs}.{b}.{p}"
    return out


def bart_like_weights(theirs: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """Our state dict from an M2M100ForConditionalGeneration's or MBartForConditionalGeneration's."""
    ours = {a: theirs[b] for a, b in layer_map(cfg.n_encoder_layers, cfg.n_decoder_layers).items()}
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
    return with_embeddings(ours, cfg, *embeddings(theirs, "" if family == "t5" else "model."))


def with_embeddings(ours: dict[str, torch.Tensor], cfg, enc: torch.Tensor, dec: torch.Tensor,
                    head: torch.Tensor) -> dict[str, torch.Tensor]:
    """`ours` with the encoder's, decoder's and generator's matrices, each where the config keeps one of its own."""
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


# --- Marian (opus-mt): its own files, vocabularies and weights

def marian_files(folder: Path) -> tuple[dict, dict, Path]:
    """(config.json, tokenizer_config.json or {}, the weights file); a missing file is refused by name."""
    need = "SRC must be a folder written by MarianMTModel.save_pretrained and MarianTokenizer.save_pretrained"
    for name in ("config.json", "source.spm", "target.spm", "vocab.json"):
        if not (folder / name).is_file():
            raise ImportRefused(f"{folder / name} is missing: {need}")
    weights = next((folder / w for w in WEIGHT_FILES if (folder / w).is_file()), None)
    if weights is None:
        raise ImportRefused(f"{folder} holds no {' or '.join(WEIGHT_FILES)}: {need}")
    tok = read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    return read_json(folder / "config.json"), tok, weights


def _token(tok_cfg: dict, name: str, default: str) -> str:
    value = tok_cfg.get(name, default)
    return value.get("content", default) if isinstance(value, dict) else str(value)  # AddedToken dicts too


def _vocab(path: Path, size: int, field: str) -> list[str]:
    stoi = read_json(path)
    ids = sorted(stoi.values()) if all(isinstance(v, int) for v in stoi.values()) else None
    if ids != list(range(len(stoi))):
        raise ImportRefused(f"{path} does not number its tokens 0..{len(stoi) - 1} once each")
    if len(stoi) != size:
        raise ImportRefused(f"{field} is {size} but {path.name} holds {len(stoi)} tokens")
    itos = [""] * size
    for t, i in stoi.items():
        itos[i] = t
    return itos


def marian_config(hf: dict, tok_cfg: dict, folder: Path, langs: tuple[str, str]) -> tuple[ModelConfig, Vocab, Vocab]:
    """Our config and vocabularies for a saved MarianConfig, or ImportRefused naming the field we cannot represent."""
    if hf.get("model_type") != "marian":
        raise ImportRefused(f"model_type is {hf.get('model_type')!r}, not 'marian': only Marian models are imported")
    for key, want in MUST_BE.items():
        if key in hf and bool(hf[key]) != want:
            raise ImportRefused(f"{key} = {hf[key]} is not supported: Marian here is post-norm with sinusoidal "
                                f"positions and no extra LayerNorm ({key} must be {want})")
    act, d_model, heads, _ = fairseq_shape(hf, "gelu")
    src_size = int(hf["vocab_size"])
    tgt_size = int(hf.get("decoder_vocab_size") or src_size)
    separate = bool(tok_cfg.get("separate_vocabs", False))
    src_itos = _vocab(folder / "vocab.json", src_size, "vocab_size")
    if separate:
        if not (folder / "target_vocab.json").is_file():
            raise ImportRefused(f"separate_vocabs is set but {folder / 'target_vocab.json'} is missing")
        tgt_itos = _vocab(folder / "target_vocab.json", tgt_size, "decoder_vocab_size")
    elif tgt_size != src_size:
        raise ImportRefused(f"decoder_vocab_size {tgt_size} differs from vocab_size {src_size} but the tokenizer has "
                            "one vocabulary")
    else:
        tgt_itos = src_itos
    share = bool(hf.get("share_encoder_decoder_embeddings", True))
    if share and src_itos != tgt_itos:
        raise ImportRefused("share_encoder_decoder_embeddings is set but the source and target vocabularies differ")
    unk, eos, pad = (_token(tok_cfg, "unk_token", "<unk>"), _token(tok_cfg, "eos_token", "</s>"),
                     _token(tok_cfg, "pad_token", "<pad>"))
    vocabs = []
    for itos in (src_itos, tgt_itos):
        stoi = {t: i for i, t in enumerate(itos)}
        for token, key in ((pad, "pad_token_id"), (eos, "eos_token_id")):
            if stoi.get(token) != hf[key]:
                raise ImportRefused(f"{key} is {hf[key]} but the vocabulary has {token} at {stoi.get(token)}")
        if unk not in stoi:
            raise ImportRefused(f"the vocabulary has no unknown token {unk}")
        start = hf["decoder_start_token_id"]
        if not 0 <= start < len(itos):
            raise ImportRefused(f"decoder_start_token_id {start} is outside the vocabulary")
        vocabs.append(Vocab(itos, {"unk": unk, "pad": pad, "bos": itos[start], "eos": eos}))
    cfg = ModelConfig(
        src_vocab_size=src_size, tgt_vocab_size=tgt_size, d_model=d_model, n_heads=heads,
        n_encoder_layers=int(hf["encoder_layers"]), n_decoder_layers=int(hf["decoder_layers"]),
        d_ff=int(hf["encoder_ffn_dim"]), dropout=float(hf.get("dropout", 0.1)),
        attn_dropout=float(hf.get("attention_dropout", 0.0)), max_len=int(hf.get("max_position_embeddings", 512)),
        norm_first=False, tie_weights=bool(hf.get("tie_word_embeddings", True)), pad_idx=int(hf["pad_token_id"]),
        activation=act, pe_layout="sin_then_cos", scale_embedding=bool(hf.get("scale_embedding", False)),
        share_embeddings=share, final_logits_bias=True, decoder_start_idx=int(hf["decoder_start_token_id"]),
        eos_idx=int(hf["eos_token_id"]), src_lang=langs[0], tgt_lang=langs[1], tokenizer="sentencepiece",
    )
    return cfg, vocabs[0], vocabs[1]


def marian_languages(tok_cfg: dict, hub_id: str | None, folder: Path,
                     given: tuple[str | None, str | None]) -> tuple[str, str]:
    """Language codes: --src-lang/--tgt-lang, else the tokenizer's, else the name (opus-mt-de-en), else src/tgt."""
    found = re.search(r"opus-mt-(?:tc-\w+-)?([a-z]{2,3}(?:_[a-z]+)?)-([a-z]{2,3}(?:_[a-z]+)?)$", hub_id or folder.name)
    from_name = found.groups() if found else (None, None)
    src = given[0] or tok_cfg.get("source_lang") or from_name[0] or "src"
    tgt = given[1] or tok_cfg.get("target_lang") or from_name[1] or "tgt"
    return str(src), str(tgt)


def marian_weights(hf_model, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict (each shared tensor once, as checkpoint.weights_state stores it) from a MarianMTModel."""
    theirs = {k: v.detach().float().cpu() for k, v in hf_model.state_dict().items()}
    enc, dec = "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"
    for key in (enc, dec):
        if key not in theirs and "model.shared.weight" in theirs:
            theirs[key] = theirs["model.shared.weight"]
    theirs.setdefault("lm_head.weight", theirs[dec])
    ours = {a: theirs[b] for a, b in layer_map(cfg.n_encoder_layers, cfg.n_decoder_layers).items()}
    ours["src_embed.lut.weight"] = theirs[enc]
    if cfg.share_embeddings and not torch.equal(theirs[enc], theirs[dec]):
        raise ImportRefused("share_encoder_decoder_embeddings is set but the encoder and decoder embeddings differ")
    if not cfg.share_embeddings:
        ours["tgt_embed.lut.weight"] = theirs[dec]
    if cfg.tie_weights and not torch.equal(theirs["lm_head.weight"], theirs[dec]):
        raise ImportRefused("tie_word_embeddings is set but lm_head differs from the decoder embeddings")
    if not cfg.tie_weights:
        ours["generator.proj.weight"] = theirs["lm_head.weight"]
    ours["generator.proj.bias"] = theirs["final_logits_bias"].reshape(-1)  # (1, V) buffer -> the projection's bias
    from model.nn.layers import sinusoidal_encoding

    table = sinusoidal_encoding(cfg.max_len, cfg.d_model, cfg.pe_layout)
    for side in ("encoder", "decoder"):  # the original's table, where stored, must be the one we compute
        stored = theirs.get(f"model.{side}.embed_positions.weight")
        if stored is not None and (stored.shape != table.shape or (stored - table).abs().max() > 1e-5):
            raise ImportRefused(f"model.{side}.embed_positions holds another positional table than Marian's sines "
                                "then cosines")
    return ours
