"""Import a Marian translation model (the opus-mt family, as ported to `transformers`) into our checkpoint format.

    python -m model.import_marian Helsinki-NLP/opus-mt-de-en --out checkpoints/opus-mt-de-en
    python -m model.import_marian path/to/folder --out checkpoints/NAME [--force]

SRC is a folder written by MarianMTModel.save_pretrained + MarianTokenizer.save_pretrained, or a hub id
(downloaded only when online). The result is an ordinary checkpoint folder (model.safetensors,
config.json, vocab.src.json, vocab.tgt.json, metrics.json) plus source.spm and target.spm, and the app
opens it like any other. Marian is the paper's Transformer with post-norm, sines-then-cosines positions
and a final logits bias; a config this code cannot run exactly (pre-norm, learned positions, another
activation, ...) is refused with one line that names the field. Before writing, the imported model is
run beside the original on one sentence and must agree.

`transformers` is imported here only, inside the functions that need it: the app never loads it.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import torch

from model.io.checkpoint import SRC_SPM, TGT_SPM, load_weights_into, save_checkpoint
from model.nn.config import ACTIVATIONS, ModelConfig
from model.nn.transformer import EncoderDecoder, parameter_counts
from model.text.vocab import Vocab

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
METADATA = ("config.json", "source.spm", "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json",
            "generation_config.json", "README.md", "spiece.model", "sentencepiece.bpe.model", "tokenizer.json",
            "special_tokens_map.json", "added_tokens.json")  # Marian's, and the other families' (model.import_hf)
AGREE = 1e-3  # largest |Δ log-probability| accepted in the check against transformers (float32 differs by ~1e-6)
# Keys of a saved MarianConfig that describe a model the transformers code (and ours) does not run: BART leftovers
# in old opus-mt configs. They must hold these values, or the weights belong to another architecture.
MUST_BE = {"normalize_before": False, "add_final_layer_norm": False, "normalize_embedding": False,
           "static_position_embeddings": True, "add_bias_logits": False}


class ImportRefused(Exception):
    """A source that cannot be imported; the message is one line that says why."""


def _layer_map(n_enc: int, n_dec: int) -> dict[str, str]:
    """Our state-dict key -> the transformers MarianMTModel key (embeddings and generator added by the caller)."""
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


def resolve_source(src: str) -> tuple[Path, str | None]:
    """(local folder, hub id or None): a folder as it is, a hub id downloaded (metadata and one weights file)."""
    path = Path(src)
    if path.is_dir():
        return path, None
    if path.exists() or not HUB_ID.match(src):
        raise ImportRefused(f"{src} is neither a folder nor a hub id such as Helsinki-NLP/opus-mt-de-en")
    try:
        from huggingface_hub import HfApi, constants, snapshot_download
        from huggingface_hub.utils import logging as hub_logging
    except ImportError:
        raise ImportRefused("downloading needs huggingface_hub (it comes with transformers): "
                            "pip install -r requirements.txt") from None
    hub_logging.set_verbosity_error()  # no retry chatter: the outcome is one line
    if not constants.HF_HUB_OFFLINE:
        _probe(src, constants.ENDPOINT)
    try:
        files = set(HfApi().list_repo_files(src))
        weights = next((w for w in WEIGHT_FILES if w in files), None)
        if weights is None:
            raise ImportRefused(f"{src} on the hub holds no {' or '.join(WEIGHT_FILES)}")
        folder = snapshot_download(src, allow_patterns=[m for m in METADATA if m in files] + [weights])
    except ImportRefused:
        raise
    except Exception as e:  # offline, unknown repository, gated: one line, never a traceback
        name = type(e).__name__
        if "NotFound" in name:
            raise ImportRefused(f"{src} was not found on the hub ({name})") from None
        raise ImportRefused(f"cannot download {src}: the hub cannot be reached ({name}); "
                            "import from a folder written by save_pretrained instead") from None
    return Path(folder), src


def _probe(src: str, endpoint: str) -> None:
    """Fail at once when the hub's host cannot be reached (the client would retry for half a minute)."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(endpoint)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=5).close()
    except OSError as e:
        raise ImportRefused(f"cannot download {src}: offline, {url.hostname} cannot be reached ({type(e).__name__}); "
                            "import from a folder written by save_pretrained instead") from None


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ImportRefused(f"{path} cannot be read as JSON ({e})") from None


def check_folder(folder: Path) -> tuple[dict, dict, Path]:
    """(config.json, tokenizer_config.json or {}, the weights file); a missing file is refused by name."""
    need = "SRC must be a folder written by MarianMTModel.save_pretrained and MarianTokenizer.save_pretrained"
    for name in ("config.json", "source.spm", "target.spm", "vocab.json"):
        if not (folder / name).is_file():
            raise ImportRefused(f"{folder / name} is missing: {need}")
    weights = next((folder / w for w in WEIGHT_FILES if (folder / w).is_file()), None)
    if weights is None:
        raise ImportRefused(f"{folder} holds no {' or '.join(WEIGHT_FILES)}: {need}")
    tok = _json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    return _json(folder / "config.json"), tok, weights


def _token(tok_cfg: dict, name: str, default: str) -> str:
    value = tok_cfg.get(name, default)
    return value.get("content", default) if isinstance(value, dict) else str(value)  # AddedToken dicts too


def _vocab(path: Path, size: int, field: str) -> list[str]:
    stoi = _json(path)
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
    act = hf.get("activation_function", "gelu")
    if act not in ACTIVATIONS:
        raise ImportRefused(f"activation_function {act!r} is not supported (supported: {', '.join(ACTIVATIONS)})")
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if hf.get(a) != hf.get(b):
            raise ImportRefused(f"{a} ({hf.get(a)}) differs from {b} ({hf.get(b)}): one value serves both stacks here")
    for key in ("eos_token_id", "pad_token_id", "decoder_start_token_id"):
        if not isinstance(hf.get(key), int):
            raise ImportRefused(f"{key} must be one integer, got {hf.get(key)!r}")
    d_model, heads = int(hf["d_model"]), int(hf["encoder_attention_heads"])
    if d_model % heads:
        raise ImportRefused(f"d_model {d_model} is not divisible by encoder_attention_heads {heads}")
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


def languages(tok_cfg: dict, hub_id: str | None, folder: Path, given: tuple[str | None, str | None]) -> tuple[str, str]:
    """Language codes: --src-lang/--tgt-lang, else the tokenizer's, else the name (opus-mt-de-en), else src/tgt."""
    found = re.search(r"opus-mt-(?:tc-\w+-)?([a-z]{2,3}(?:_[a-z]+)?)-([a-z]{2,3}(?:_[a-z]+)?)$", hub_id or folder.name)
    from_name = found.groups() if found else (None, None)
    src = given[0] or tok_cfg.get("source_lang") or from_name[0] or "src"
    tgt = given[1] or tok_cfg.get("target_lang") or from_name[1] or "tgt"
    return str(src), str(tgt)


def licence(folder: Path) -> str | None:
    """The `license:` field of the model card's front matter (README.md), when there is one."""
    card = folder / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8", errors="replace")
    front = text.split("---", 2)[1] if text.startswith("---") and text.count("---") >= 2 else ""
    found = re.search(r"^license:\s*(\S+)", front, flags=re.MULTILINE)
    return found.group(1) if found else None


def convert_weights(hf_model, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict (each shared tensor once, as checkpoint.weights_state stores it) from a MarianMTModel."""
    theirs = {k: v.detach().float().cpu() for k, v in hf_model.state_dict().items()}
    enc, dec = "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"
    for key in (enc, dec):
        if key not in theirs and "model.shared.weight" in theirs:
            theirs[key] = theirs["model.shared.weight"]
    theirs.setdefault("lm_head.weight", theirs[dec])
    ours = {a: theirs[b] for a, b in _layer_map(cfg.n_encoder_layers, cfg.n_decoder_layers).items()}
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


def _agreement(hf_model, model: EncoderDecoder, src_ids: list[int]) -> float:
    """Largest |Δ log-probability| between the original and the import, teacher-forced on a few tokens."""
    cfg = model.cfg
    src = torch.tensor([src_ids])
    tgt = torch.tensor([[cfg.decoder_start_idx] + src_ids[:-1][:8]])  # any target ids do for a comparison
    with torch.inference_mode():
        theirs = torch.log_softmax(hf_model(input_ids=src, decoder_input_ids=tgt).logits.float(), dim=-1)
        ours = model(src, tgt)
    return float((theirs - ours).abs().max())


def import_marian(src: str, out: str | Path, force: bool = False, src_lang: str | None = None,
                  tgt_lang: str | None = None) -> dict:
    """Import SRC into the checkpoint folder `out`; returns the model-card entry written to metrics.json."""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise ImportRefused(f"{out} exists and is not empty: choose another --out or pass --force")
    folder, hub_id = resolve_source(src)
    hf_cfg, tok_cfg, weights = check_folder(folder)
    langs = languages(tok_cfg, hub_id, Path(src), (src_lang, tgt_lang))
    cfg, sv, tv = marian_config(hf_cfg, tok_cfg, folder, langs)
    try:
        import transformers
        from transformers import MarianMTModel
    except ImportError:
        raise ImportRefused("the importer needs transformers: pip install -r requirements.txt") from None
    transformers.utils.logging.set_verbosity_error()  # the outcome is one line, not progress bars and notices
    transformers.utils.logging.disable_progress_bar()
    try:
        hf_model = MarianMTModel.from_pretrained(str(folder)).float().eval()
    except Exception as e:  # a broken weights file: one line
        raise ImportRefused(f"{weights} cannot be loaded by transformers "
                            f"({type(e).__name__}: {str(e)[:200]})") from None
    model = EncoderDecoder(cfg)
    state = convert_weights(hf_model, cfg)
    try:
        load_weights_into(model, state)
    except RuntimeError as e:
        raise ImportRefused(f"{weights} does not fit the config: {str(e).splitlines()[0]}") from None
    model.eval()
    from model.text.pieces import PieceCodec

    codec = PieceCodec(folder / "source.spm", folder / "target.spm", set(sv.specials.values()))
    probe = sv.encode(codec.source_pieces("A short sentence to compare the two implementations, 1 2 3.")) + [sv.eos_idx]
    diff = _agreement(hf_model, model, probe)
    if not diff <= AGREE:
        raise ImportRefused(f"the imported model disagrees with transformers (max |Δ log p| = {diff:.2e} > {AGREE}); "
                            "not written")
    card = {
        "family": "marian",
        # a local folder by its name only: a checkpoint may be shipped, and must not hold this machine's paths
        "source": hub_id or f"local folder {Path(src).resolve().name}",
        "hub_id": hub_id,
        "licence": licence(folder) or "unknown: the source has no model card (README.md) with a license field",
        "parameters": int(sum(parameter_counts(model).values())),
        "src_lang": cfg.src_lang, "tgt_lang": cfg.tgt_lang,
        "vocabulary": len(sv) if cfg.share_embeddings else [len(sv), len(tv)],
        "transformers_version": transformers.__version__,
        "agreement_max_abs_log_prob": diff,
        "importer": "python -m model.import_marian",
    }
    metrics = {"model": {"parameters": card["parameters"], "config": cfg.to_dict()}, "imported": card,
               "note": f"Marian model imported from {card['source']} (licence: {card['licence']}); "
                       "its quality is its authors', not measured here"}
    if out.exists() and force:
        shutil.rmtree(out)
    save_checkpoint(out, model, sv, tv, metrics)
    shutil.copyfile(folder / "source.spm", out / SRC_SPM)
    shutil.copyfile(folder / "target.spm", out / TGT_SPM)
    return card


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="folder from save_pretrained, or a hub id such as Helsinki-NLP/opus-mt-de-en")
    ap.add_argument("--out", required=True, help="checkpoint folder to write, e.g. checkpoints/opus-mt-de-en")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    ap.add_argument("--src-lang", help="source language code (default: the tokenizer's, or from the name)")
    ap.add_argument("--tgt-lang", help="target language code (default: the tokenizer's, or from the name)")
    args = ap.parse_args(argv)
    try:
        card = import_marian(args.src, args.out, args.force, args.src_lang, args.tgt_lang)
    except ImportRefused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {card['parameters']:,} parameters, {card['src_lang']}→{card['tgt_lang']}, "
          f"licence {card['licence']}; agrees with transformers within {card['agreement_max_abs_log_prob']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
