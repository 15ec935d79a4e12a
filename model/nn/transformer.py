"""EncoderDecoder: the whole model, and the masks it uses.

Shape letters: see model/__init__.py.
Masks are bool with True = may attend and no head dimension: (b, 1, 1, s) or (b, 1, t, t).
"""
from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

from model.nn.config import ModelConfig
from model.nn.hooks import FwdHooks, Hooks, check_filter, check_names, inside, module_points
from model.nn.layers import DecoderLayer, Embeddings, EncoderLayer, RelativePositionBias, Stack, block_parts, make_norm
from model.nn.rotary import layer_masks, softcap

RETURN_TYPES = ("log_probs", "logits")  # TransformerLens's words for what a pass returns


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


class Generator(nn.Module):
    """Linear projection to the target vocabulary, then log-softmax.

    The projection's bias is the final logits bias (Marian's `final_logits_bias`); `bias=False` drops it. `softcap`
    squashes the logits into (−cap, cap) as cap·tanh(logit/cap) (Gemma 2's final_logit_softcapping).
    """

    def __init__(self, d_model: int, vocab_size: int, bias: bool = True, softcap: float = 0.0):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)
        self.softcap = softcap

    def forward(self, x: torch.Tensor, return_type: str = "log_probs") -> torch.Tensor:
        """(..., V) log-probabilities, or with return_type="logits" the scores before the softmax (capped)."""
        logits = self.proj(x)
        logits = softcap(logits, self.softcap) if self.softcap else logits
        return logits if return_type == "logits" else F.log_softmax(logits, dim=-1)


# Module names before they were the hook points' (encoder_layers.0.self_attn.w_q.weight is now
# encoder.0.attn.w_q.weight): the shipped checkpoints, and every folder and training state written before, store them.
OLD_STACKS = {"encoder_layers": "encoder", "decoder_layers": "decoder", "encoder_norm": "encoder_final_ln",
              "decoder_norm": "decoder_final_ln"}
OLD_BLOCK_PARTS = {"self_attn": "attn", "ff": "mlp"}


def current_name(key: str) -> str:
    """A state-dict key (or module path) under today's module names; one that is not an old name stays as it is."""
    parts = key.split(".")
    if parts[0] not in OLD_STACKS:
        return key
    if parts[0].endswith("_layers") and len(parts) > 2:  # encoder_layers.{l}.self_attn...
        parts[2] = OLD_BLOCK_PARTS.get(parts[2], parts[2])
    parts[0] = OLD_STACKS[parts[0]]
    return ".".join(parts)


def renamed_state(state: dict) -> dict:
    """A state dict with its old keys (OLD_STACKS) under today's names, in the same order; the same dict when it has
    none. torch's per-module `_metadata`, where there is one, is renamed alike."""
    if not any(k.split(".", 1)[0] in OLD_STACKS for k in state):
        return state
    out = OrderedDict((current_name(k), v) for k, v in state.items())
    if len(out) < len(state):
        raise ValueError("the state dict holds some tensors under both the old and today's module names")
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        out._metadata = OrderedDict((current_name(k), v) for k, v in metadata.items())
    return out


class EncoderDecoder(nn.Module):
    """The Transformer of "Attention Is All You Need", with an optional pre-norm variant, and what the config says
    other families are (model/nn/config.py): RMSNorm, learned or relative positions, an embedding norm, no
    scaling of the scores, a gated feed-forward, no biases; and Gemma 2's (T5Gemma): rotary positions, grouped
    key/value heads, sliding windows, soft-capped scores and logits, norms after the sub-layers."""

    def __init__(self, cfg: ModelConfig, init: bool = True):
        """`init=False` skips the model's own random initialisation (half of building the shipped model's time),
        for a model whose every weight is loaded next, strictly (model.io.checkpoint): a server's cold start waits
        for it."""
        super().__init__()
        self.cfg = cfg
        layer_args = (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout, cfg.attn_dropout, cfg.norm_first, cfg.activation)
        embed_args = (cfg.d_model, cfg.max_len, cfg.dropout, cfg.pad_idx, cfg.scale_embedding, cfg.pe_layout)
        embed_kw = {"init": init, "positions": cfg.positions, "pos_offset": cfg.pos_offset,
                    "norm": cfg.norm if cfg.embed_norm else None, "eps": cfg.norm_eps}
        self.src_embed = Embeddings(cfg.src_vocab_size, *embed_args, **embed_kw)
        self.tgt_embed = Embeddings(cfg.tgt_vocab_size, *embed_args, **embed_kw)
        parts = block_parts(cfg)
        self.encoder = Stack([EncoderLayer(*layer_args, **parts) for _ in range(cfg.n_encoder_layers)])
        # The decoder's embedding points and bias point (_pos_bias) carry its name: decoder.hook_embed, ...
        self.decoder = Stack([DecoderLayer(*layer_args, **parts) for _ in range(cfg.n_decoder_layers)],
                             (*self.tgt_embed.hook_points(), *["hook_pos_bias"] * (cfg.positions == "relative")))
        if cfg.positions == "relative":  # one bias per stack, shared by its layers' self-attention (T5)
            self.src_pos_bias = RelativePositionBias(cfg.rel_buckets, cfg.rel_max_distance, cfg.n_heads, True)
            self.tgt_pos_bias = RelativePositionBias(cfg.rel_buckets, cfg.rel_max_distance, cfg.n_heads, False)
        # Pre-norm leaves the residual stream un-normalised, so each stack ends with a norm.
        final = (lambda: make_norm(cfg.d_model, cfg.norm, cfg.norm_eps)) if cfg.norm_first else nn.Identity
        self.encoder_final_ln, self.decoder_final_ln = final(), final()
        self.generator = Generator(cfg.d_model, cfg.tgt_vocab_size, cfg.final_logits_bias, cfg.final_softcap)
        for name, p in self.named_parameters():
            if init and p.dim() > 1 and "lut" not in name and "pos" not in name:
                nn.init.xavier_uniform_(p)
        self.tie()

    def hook_points(self) -> list[str]:
        """Its points in the order a pass reaches them, a child's name standing for the child's points
        (model/nn/hooks.py module_points): the encoder's embedding at the top (TransformerLens's names), then the
        bias (_pos_bias) and each stack with its final norm's point (_final; post-norm has none)."""
        norm = {name: [f"{name}.hook_normalized"] * (not isinstance(getattr(self, name), nn.Identity))
                for name in ("encoder_final_ln", "decoder_final_ln")}
        return [*self.src_embed.hook_points(), *["hook_pos_bias"] * (self.cfg.positions == "relative"), "encoder",
                *norm["encoder_final_ln"], "decoder", *norm["decoder_final_ln"]]

    def load_state_dict(self, state_dict, *args, **kwargs):
        """nn.Module's, for a state under today's module names or the old ones (renamed_state)."""
        return super().load_state_dict(renamed_state(state_dict), *args, **kwargs)

    def tie(self) -> None:
        """One matrix for both sides' embeddings (Marian's `shared`) and for the generator, as the config says."""
        if self.cfg.share_embeddings:
            self.tgt_embed.lut.weight = self.src_embed.lut.weight
        if self.cfg.tie_weights:
            self.generator.proj.weight = self.tgt_embed.lut.weight

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor, hooks: Hooks | None = None) -> torch.Tensor:
        """(b, s) ids -> (b, s, d) memory, through the hook points of `hooks` (model/nn/hooks.py)."""
        return self.encode_from(self.src_embed(src, hooks), src_mask, 0, hooks)

    def encode_from(self, x: torch.Tensor, src_mask: torch.Tensor, start: int, hooks: Hooks | None = None):
        """Encoder layers start.. on x (b, s, d), the input of layer `start`, then the final norm: an analysis that
        changes layer `start` keeps the layers below as they ran (x is their encoder.{start}.hook_resid_pre)."""
        bias = self._pos_bias("src_pos_bias", x.shape[1], x.shape[1], 0, hooks)
        # sliding windows (T5Gemma): a local layer's mask also hides the keys beyond its window
        windows = self.cfg.windows("encoder")
        masks = layer_masks(src_mask, windows, x.shape[1], x.shape[1], 0, False, x.device) if any(windows) else \
            [src_mask] * len(windows)
        for n in range(start, len(self.encoder)):
            x = self.encoder[n](x, masks[n], inside(hooks, f"encoder.{n}"), bias)
        return self._final(self.encoder_final_ln, x, hooks, "encoder_final_ln")

    def _pos_bias(self, which: str, n_queries: int, n_keys: int, offset: int, hooks: Hooks | None):
        """(1, h, i, j) the relative-position bias of one stack (`src_pos_bias` or `tgt_pos_bias`), through its
        point (`hook_pos_bias`, `decoder.hook_pos_bias`), or None for a model with a position table."""
        if self.cfg.positions != "relative":
            return None
        bias = getattr(self, which)(n_queries, n_keys, offset)
        name = "hook_pos_bias" if which == "src_pos_bias" else "decoder.hook_pos_bias"
        return bias if hooks is None else hooks(name, bias)

    def decode(self, memory, src_mask, tgt, tgt_mask, hooks: Hooks | None = None, cache: dict | None = None):
        """(b, t) ids + memory -> (b, t, d) decoder states after the final norm (the generator's input).

        With a `cache` from new_cache(), `tgt` holds only the newest position(s): keys and values of earlier
        positions come from the cache, which this call extends (a hook then sees the new positions only).
        """
        offset = 0 if cache is None else cache["len"]
        y = self.tgt_embed(tgt, inside(hooks, "decoder"), offset)
        y = self.decode_from(y, memory, src_mask, tgt_mask, 0, hooks, cache)
        if cache is not None:
            cache["len"] += tgt.shape[1]
        return y

    def decode_from(self, y, memory, src_mask, tgt_mask, start: int, hooks: Hooks | None = None,
                    cache: dict | None = None) -> torch.Tensor:
        """Decoder layers start.. on y (b, t, d), the input of layer `start`, then the final norm."""
        past = 0 if cache is None else cache["len"]
        bias = self._pos_bias("tgt_pos_bias", y.shape[1], past + y.shape[1], past, hooks)
        windows = self.cfg.windows("decoder")
        masks = layer_masks(tgt_mask, windows, y.shape[1], past + y.shape[1], past, True, y.device) if any(windows) \
            else [tgt_mask] * len(windows)
        for n in range(start, len(self.decoder)):
            y = self.decoder[n](y, memory, src_mask, masks[n], inside(hooks, f"decoder.{n}"),
                                None if cache is None else cache["layers"][n], bias)
        y = self._final(self.decoder_final_ln, y, hooks, "decoder_final_ln")
        return y * self.cfg.generator_scale if self.cfg.generator_scale != 1.0 else y

    @staticmethod
    def _final(norm: nn.Module, x: torch.Tensor, hooks: Hooks | None, name: str) -> torch.Tensor:
        if isinstance(norm, nn.Identity):  # post-norm: no final norm, no point
            return x
        x = norm(x)
        return x if hooks is None else hooks(f"{name}.hook_normalized", x)

    def new_cache(self) -> dict:
        """An empty key/value cache for one incremental decoding; it belongs to the caller, not the model."""
        return {"len": 0, "layers": [{"self": {}, "cross": {}} for _ in self.decoder]}

    @staticmethod
    def cut_cache(cache: dict, n: int) -> dict:
        """The cache cut back to its first n positions, to decode on from there (the cross-attention's keys and
        values, the source's, stay whole)."""
        if n < cache["len"]:
            for layer in cache["layers"]:
                own = layer["self"]  # empty before the first position
                if n == 0:
                    own.clear()
                elif own:
                    own["k"], own["v"] = own["k"][:, :, :n], own["v"][:, :, :n]  # (b, h, n, d_k)
            cache["len"] = n
        return cache

    def forward(
        self,
        src: torch.Tensor,  # (b, s)
        tgt: torch.Tensor,  # (b, t) decoder input: <bos> y1 .. y_{t-1}
        hooks: Hooks | None = None,
        use_src_padding_mask: bool = True,
        use_causal_mask: bool = True,
        return_type: str = "log_probs",
    ) -> torch.Tensor:
        """Teacher-forced pass: (b, t, V) log-probabilities, or "logits"."""
        if return_type not in RETURN_TYPES:
            raise ValueError(f"return_type is one of {', '.join(RETURN_TYPES)}, not {return_type!r}")
        pad = self.cfg.pad_idx
        src_mask = make_src_mask(src, pad, use_src_padding_mask)
        tgt_mask = make_tgt_mask(tgt, pad, causal=use_causal_mask)
        memory = self.encode(src, src_mask, hooks)
        return self.generator(self.decode(memory, src_mask, tgt, tgt_mask, hooks), return_type)

    def run_with_hooks(self, src: torch.Tensor, tgt: torch.Tensor, fwd_hooks: FwdHooks = (), **kwargs) -> torch.Tensor:
        """TransformerLens's run_with_hooks: the teacher-forced pass with `fwd_hooks` [(name or predicate, fn)],
        fn(activation, name) returning a replacement or None. They hold for this call only. (b, t, V)."""
        check_names(hook_names(self.cfg), fwd_hooks)
        return self(src, tgt, Hooks(fwd_hooks), **kwargs)

    def run_with_cache(self, src: torch.Tensor, tgt: torch.Tensor, names_filter=None, fwd_hooks: FwdHooks = (),
                       **kwargs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """TransformerLens's run_with_cache: ((b, t, V) log-probabilities, {point name: activation}) of the points
        `names_filter` keeps (a name, names or a predicate; all by default), detached, after any `fwd_hooks`."""
        check_names(hook_names(self.cfg), fwd_hooks)
        check_filter(hook_names(self.cfg), names_filter)
        cache: dict[str, torch.Tensor] = {}
        return self(src, tgt, Hooks(fwd_hooks, cache, names_filter), **kwargs), cache


def parameter_counts(model: EncoderDecoder) -> dict[str, int]:
    """Parameters per top-level module; a tied generator counts only its bias, shared target embeddings 0."""
    counts = {name: 0 for name, _ in model.named_children()}
    for name, p in model.named_parameters():  # a shared (tied) tensor comes once, under its first name
        counts[name.split(".")[0]] += p.numel()
    # Parameter-free modules (post-norm's Identity) are left out; the embeddings and generator always appear.
    return {k: v for k, v in counts.items() if v or k in ("src_embed", "tgt_embed", "generator")}


def reorder_cache(cache: dict, rows: torch.Tensor) -> None:
    """Select/repeat batch rows of every cached key and value (beam search keeps some beams)."""
    for layer in cache["layers"]:
        for part in layer.values():
            for name in ("k", "v"):
                if name in part:
                    part[name] = part[name].index_select(0, rows)


# The config fields that decide which points a model has (its modules' hook_points read them); sizes only shape them.
POINT_FIELDS = ("n_encoder_layers", "n_decoder_layers", "norm_first", "ff_gated", "positions", "embed_norm",
                "attn_softcap", "sublayer_post_norm")
# The rest of a skeleton's config: the smallest sizes a model can be built with.
SKELETON = ModelConfig(src_vocab_size=4, tgt_vocab_size=4, d_model=4, n_heads=1, d_ff=4, max_len=1)


def hook_names(cfg) -> list[str]:
    """Every point of a model with this config, in the order a pass reaches them: module_points of a skeleton of
    the model (its modules without weights, on the meta device), built once per POINT_FIELDS."""
    return list(_skeleton_names(tuple(getattr(cfg, f, getattr(SKELETON, f)) for f in POINT_FIELDS)))


@functools.lru_cache(maxsize=32)
def _skeleton_names(key: tuple) -> tuple[str, ...]:
    with torch.device("meta"):
        skeleton = EncoderDecoder(dataclasses.replace(SKELETON, **dict(zip(POINT_FIELDS, key, strict=True))),
                                  init=False)
    return tuple(module_points(skeleton))
