"""EncoderDecoder: the whole model, and the masks it uses.

Shape letters: see model/__init__.py.
Masks are bool with True = may attend and no head dimension: (b, 1, 1, s) or (b, 1, t, t).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.config import ModelConfig
from model.nn.layers import DecoderLayer, Embeddings, EncoderLayer
from model.nn.trace import Trace

# 'enc_self' | 'dec_self' | 'cross' -> (n_layers, n_heads) gates, 0/1 to switch heads off, or (n_layers, b, n_heads)
# for a gate per sentence (per-example gradients in one backward pass)
HeadMask = dict[str, torch.Tensor]
# Activation patching (model/analysis/patch.py): (component, 0-based layer) -> (where, value), values from another run.
#   ('enc_self' | 'dec_self' | 'cross', l): the heads' outputs before W_O; where bool (b, h), value (1|b, h, i, d_k)
#   ('enc_resid' | 'dec_resid', l): the residual stream after encoder / decoder layer l; where bool (b, n) marks
#       the positions replaced, value (1|b, n, d)
Patch = dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]]
PATCH_COMPONENTS = ("enc_self", "dec_self", "cross", "enc_resid", "dec_resid")


def subsequent_mask(size: int, device=None) -> torch.Tensor:
    """(1, 1, t, t) lower-triangular: position i may look at positions <= i."""
    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device)).view(1, 1, size, size)


def make_src_mask(src: torch.Tensor, pad_idx: int, use_padding_mask: bool = True) -> torch.Tensor:
    """(b, 1, 1, s): padded source positions are masked as keys (queries still compute rows)."""
    if not use_padding_mask:
        return torch.ones(src.shape[0], 1, 1, src.shape[1], dtype=torch.bool, device=src.device)
    return (src != pad_idx).view(src.shape[0], 1, 1, src.shape[1])


def make_tgt_mask(tgt: torch.Tensor, pad_idx: int, causal: bool = True, use_padding_mask: bool = True) -> torch.Tensor:
    """(b, 1, t, t): target padding (as keys) combined with the causal mask.

    Position 0 is the decoder's start token and never padding, even where that token is <pad>
    (Marian starts from <pad>): batches are padded on the right.
    """
    b, t = tgt.shape
    mask = torch.ones(b, 1, t, t, dtype=torch.bool, device=tgt.device)
    if use_padding_mask:
        keys = tgt != pad_idx  # (b, t)
        keys[:, 0] = True
        mask = mask & keys.view(b, 1, 1, t)
    if causal:
        mask = mask & subsequent_mask(t, tgt.device)
    return mask


def _head_patch(patch: Patch | None, kind: str, layer: int):
    return None if patch is None else patch.get((kind, layer))


def _patch_stream(x: torch.Tensor, patch: Patch | None, kind: str, layer: int) -> torch.Tensor:
    """The residual stream x (b, n, d) with the patched positions replaced exactly (torch.where, not a blend)."""
    part = None if patch is None else patch.get((kind, layer))
    if part is None:
        return x
    where, value = part
    return torch.where(where.unsqueeze(-1), value.to(x.dtype), x)  # where (b, n) -> (b, n, 1)


class Generator(nn.Module):
    """Linear projection to the target vocabulary, then log-softmax.

    The projection's bias is the final logits bias (Marian's `final_logits_bias`); `bias=False` drops it.
    """

    def __init__(self, d_model: int, vocab_size: int, bias: bool = True):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.proj(x), dim=-1)


class EncoderDecoder(nn.Module):
    """The Transformer of "Attention Is All You Need", with an optional pre-norm variant."""

    def __init__(self, cfg: ModelConfig, init: bool = True):
        """`init=False` skips the model's own random initialisation (half of building the shipped model's time),
        for a model whose every weight is loaded next, strictly (model.io.checkpoint): a server's cold start waits
        for it."""
        super().__init__()
        self.cfg = cfg
        layer_args = (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout, cfg.attn_dropout, cfg.norm_first, cfg.activation)
        embed_args = (cfg.d_model, cfg.max_len, cfg.dropout, cfg.pad_idx, cfg.scale_embedding, cfg.pe_layout)
        self.src_embed = Embeddings(cfg.src_vocab_size, *embed_args, init=init)
        self.tgt_embed = Embeddings(cfg.tgt_vocab_size, *embed_args, init=init)
        self.encoder_layers = nn.ModuleList([EncoderLayer(*layer_args) for _ in range(cfg.n_encoder_layers)])
        self.decoder_layers = nn.ModuleList([DecoderLayer(*layer_args) for _ in range(cfg.n_decoder_layers)])
        # Pre-norm leaves the residual stream un-normalised, so each stack ends with a LayerNorm.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.generator = Generator(cfg.d_model, cfg.tgt_vocab_size, cfg.final_logits_bias)
        for name, p in self.named_parameters():
            if init and p.dim() > 1 and "lut" not in name:
                nn.init.xavier_uniform_(p)
        if cfg.share_embeddings:  # one matrix for both sides (Marian's `shared`)
            self.tgt_embed.lut.weight = self.src_embed.lut.weight
        if cfg.tie_weights:
            self.generator.proj.weight = self.tgt_embed.lut.weight

    def check_patch(self, patch: Patch) -> None:
        """ValueError for a patch key that names no component or no layer of this model."""
        layers = {"enc_self": self.cfg.n_encoder_layers, "enc_resid": self.cfg.n_encoder_layers}
        for key in patch:
            kind, layer = key if isinstance(key, tuple) and len(key) == 2 else (key, None)
            n = layers.get(kind, self.cfg.n_decoder_layers)
            if kind not in PATCH_COMPONENTS or not isinstance(layer, int) or not 0 <= layer < n:
                raise ValueError(f"patch key {key!r} is not (component, 0-based layer) with a component of "
                                 f"{', '.join(PATCH_COMPONENTS)}")

    def encode(self, src, src_mask, head_mask: HeadMask | None = None, trace: Trace | None = None,
               patch: Patch | None = None) -> torch.Tensor:
        """(b, s) ids -> (b, s, d) memory; fills trace.src_embed / enc_self when a Trace is given.

        `patch` replaces head outputs or residual streams of encoder layers (see Patch); the trace keeps the
        attention as computed, before a head's output is replaced.
        """
        want = trace is not None
        if patch is not None:
            self.check_patch(patch)
        x, emb = self.src_embed(src, want)
        records = []
        for n, layer in enumerate(self.encoder_layers):
            hm = None if head_mask is None or "enc_self" not in head_mask else head_mask["enc_self"][n]
            x, rec = layer(x, src_mask, hm, want, head_patch=_head_patch(patch, "enc_self", n))
            x = _patch_stream(x, patch, "enc_resid", n)
            records.append(rec)
        if want:
            trace.src_embed, trace.enc_self = emb, records
        return self.encoder_norm(x)

    def decode(self, memory, src_mask, tgt, tgt_mask, head_mask: HeadMask | None = None, trace: Trace | None = None,
               cache: dict | None = None, patch: Patch | None = None):
        """(b, t) ids + memory -> (b, t, d) decoder states; fills trace.tgt_embed / dec_self / cross.

        With a `cache` from new_cache(), `tgt` holds only the newest position(s): keys and values of
        earlier positions come from the cache, which this call extends. `patch` (see Patch) replaces head
        outputs or residual streams of decoder layers in a whole pass (not with a cache).
        """
        want = trace is not None
        if patch is not None:
            if cache is not None:
                raise ValueError("a patch replaces whole passes: decode without a cache")
            self.check_patch(patch)
        offset = 0 if cache is None else cache["len"]
        x, emb = self.tgt_embed(tgt, want, offset)
        self_recs, cross_recs = [], []
        for n, layer in enumerate(self.decoder_layers):
            shm = None if head_mask is None or "dec_self" not in head_mask else head_mask["dec_self"][n]
            chm = None if head_mask is None or "cross" not in head_mask else head_mask["cross"][n]
            layer_cache = None if cache is None else cache["layers"][n]
            x, self_rec, cross_rec = layer(x, memory, src_mask, tgt_mask, shm, chm, want, layer_cache,
                                           _head_patch(patch, "dec_self", n), _head_patch(patch, "cross", n))
            x = _patch_stream(x, patch, "dec_resid", n)
            self_recs.append(self_rec)
            cross_recs.append(cross_rec)
        if want:
            trace.tgt_embed, trace.dec_self, trace.cross = emb, self_recs, cross_recs
        if cache is not None:
            cache["len"] += tgt.shape[1]
        return self.decoder_norm(x)

    def new_cache(self) -> dict:
        """An empty key/value cache for one incremental decoding; it belongs to the caller, not the model."""
        return {"len": 0, "layers": [{"self": {}, "cross": {}} for _ in self.decoder_layers]}

    def forward(
        self,
        src: torch.Tensor,  # (b, s)
        tgt: torch.Tensor,  # (b, t) decoder input: <bos> y1 .. y_{t-1}
        return_trace: bool = False,
        head_mask: HeadMask | None = None,
        use_src_padding_mask: bool = True,
        use_causal_mask: bool = True,
        patch: Patch | None = None,  # activation patching: values from another run (see Patch)
    ) -> tuple[torch.Tensor, Trace | None]:
        """Teacher-forced pass: (b, t, V) log-probabilities, and the Trace when `return_trace` (else None)."""
        pad = self.cfg.pad_idx
        src_mask = make_src_mask(src, pad, use_src_padding_mask)
        tgt_mask = make_tgt_mask(tgt, pad, causal=use_causal_mask)
        record = Trace() if return_trace else None
        memory = self.encode(src, src_mask, head_mask, record, patch)
        log_probs = self.generator(self.decode(memory, src_mask, tgt, tgt_mask, head_mask, record, patch=patch))
        if record is not None:
            record.log_probs = log_probs
        return log_probs, record


def parameter_counts(model: EncoderDecoder) -> dict[str, int]:
    """Parameters per top-level module; a tied generator counts only its bias, shared target embeddings 0."""
    counts = {name: 0 for name, _ in model.named_children()}
    seen: set[int] = set()
    for name, p in model.named_parameters():  # named_parameters yields a shared tensor once
        if id(p) in seen:
            continue
        seen.add(id(p))
        top = name.split(".")[0]
        counts[top] += p.numel()
    # Parameter-free modules (post-norm's Identity) are left out; the embeddings and generator always appear.
    return {k: v for k, v in counts.items() if v or k in ("src_embed", "tgt_embed", "generator")}


def reorder_cache(cache: dict, rows: torch.Tensor) -> None:
    """Select/repeat batch rows of every cached key and value (beam search keeps some beams)."""
    for layer in cache["layers"]:
        for part in layer.values():
            for name in ("k", "v"):
                if name in part:
                    part[name] = part[name].index_select(0, rows)
