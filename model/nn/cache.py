"""ActivationCache: what one call's hook points held, as TransformerLens's cache.

A mapping by point name (`cache["decoder.1.cross_attn.hook_pattern"]`, as the plain dict was), with the tokens it was
made on, each row's length for a padded batch, and TransformerLens's helpers: `stack` (one point of every layer,
the layer axis first), `accumulated_resid` and `decompose_resid` (the residual stream after each layer, and the
parts whose sum it is), `apply_ln_to_stack` (the final norm's scaling), `remove_batch_dim` and `to`.

The residual stream is a sum only in a pre-norm model (x + f(N(x)) at every sub-layer); a post-norm model
normalises after each sub-layer, so `decompose_resid` and `apply_ln_to_stack` refuse it rather than return parts
that do not add up.
"""
from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterator, Mapping

import torch

SIDES = ("encoder", "decoder")


class ActivationCache(Mapping):
    """{point name: activation} of one call; tensors keep the batch axis first unless `remove_batch_dim()`."""

    def __init__(self, data: dict[str, torch.Tensor], model, src_tokens: list, tgt_tokens: list,
                 src_lengths: list[int] | None = None, tgt_lengths: list[int] | None = None,
                 has_batch_dim: bool = True):
        self._data, self.model = data, model
        self.src_tokens, self.tgt_tokens = src_tokens, tgt_tokens  # a list of str, or one list per batch row
        self.src_lengths, self.tgt_lengths = src_lengths, tgt_lengths
        self.has_batch_dim = has_batch_dim

    # --- the mapping -------------------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self._data[name]
        except KeyError:
            close = difflib.get_close_matches(str(name), list(self._data), n=3)
            raise KeyError(f"{name!r} is not in this cache ({len(self._data)} points" +
                           (f"; did you mean {', '.join(close)}?)" if close else
                            "; run_with_cache's names_filter chose them)")) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ActivationCache({len(self)} points: {', '.join(list(self)[:4])}{', …' if len(self) > 4 else ''})"

    @property
    def src_padding_mask(self) -> torch.Tensor | None:
        """(b, s) bool, True at a real source token (None: one sentence, no padding)."""
        return _mask(self.src_lengths)

    @property
    def tgt_padding_mask(self) -> torch.Tensor | None:
        """(b, T) bool, True at a decoder position that reads a real token (None: one sentence)."""
        return _mask(self.tgt_lengths)

    # --- TransformerLens's helpers -------------------------------------------------------------------------------
    def stack(self, pattern: str) -> torch.Tensor:
        """Every cached point that `pattern` matches (`*` for the layer: "decoder.*.cross_attn.hook_pattern"; a
        point alone, "cross_attn.hook_pattern", matches it in every layer), stacked in layer order: (L, ...)."""
        glob = pattern if "*" in pattern or pattern in self._data else f"*.{pattern}"
        names = sorted((n for n in self._data if fnmatch.fnmatchcase(n, glob)), key=_layer_of)
        if not names:
            close = difflib.get_close_matches(pattern, list(self._data), n=3)
            raise KeyError(f"no cached point matches {pattern!r}" + (f"; close: {', '.join(close)}" if close else ""))
        kinds = sorted({re.sub(r"\.\d+\.", ".*.", n) for n in names})
        if len(kinds) > 1:  # "hook_resid_post" is in both stacks: one axis of layers cannot hold both
            raise ValueError(f"{pattern!r} matches {' and '.join(kinds)}: name one ({kinds[-1]!r})")
        return torch.stack([self._data[n] for n in names])

    def accumulated_resid(self, side: str = "decoder", layer: int | None = None, incl_mid: bool = False,
                          apply_ln: bool = False, return_labels: bool = False):
        """The residual stream of `side` before each layer up to `layer` (None: every layer, then after the last):
        (k, b, n, d), with TransformerLens's labels ("0_pre", "0_mid", …, "final_post"). `incl_mid` adds the
        stream between sub-layers; `apply_ln` scales each by the final norm (apply_ln_to_stack)."""
        n_layers = self._layers(side)
        upto = n_layers if layer is None or layer == -1 else layer
        if not 0 <= upto <= n_layers:
            raise ValueError(f"layer {layer} is out of range: 0 to {n_layers} ({side})")
        mids = ["mid", "mid_cross"] if side == "decoder" else ["mid"]
        labels, names = [], []
        for l in range(min(upto + 1, n_layers)):
            parts = ["pre"] + (mids if incl_mid and l < upto else [])
            labels += [f"{l}_{p}" for p in parts]
            names += [f"{side}.{l}.hook_resid_{p}" for p in parts]
        if upto == n_layers:
            labels.append("final_post")
            names.append(f"{side}.{n_layers - 1}.hook_resid_post")
        out = torch.stack([self[n] for n in names])
        out = self.apply_ln_to_stack(out, side) if apply_ln else out
        return (out, labels) if return_labels else out

    def decompose_resid(self, side: str = "decoder", layer: int | None = None, apply_ln: bool = False,
                        return_labels: bool = False):
        """The parts whose sum is `side`'s residual stream before `layer` (None: after the last layer): the
        embeddings, then each layer's attention (and cross-attention) and MLP outputs: (k, b, n, d), with labels.
        A pre-norm model's only: elsewhere the stream is normalised after each sub-layer and is no sum."""
        self._pre_norm("decompose_resid")
        n_layers = self._layers(side)
        upto = n_layers if layer is None or layer == -1 else layer
        if not 0 <= upto <= n_layers:
            raise ValueError(f"layer {layer} is out of range: 0 to {n_layers} ({side})")
        labels, parts = self._embed_parts(side)
        outs = ["attn_out", "cross_attn_out", "mlp_out"] if side == "decoder" else ["attn_out", "mlp_out"]
        for l in range(upto):
            labels += [f"{l}_{o}" for o in outs]
            parts += [self[f"{side}.{l}.hook_{o}"] for o in outs]
        out = torch.stack(parts)
        out = self.apply_ln_to_stack(out, side) if apply_ln else out
        return (out, labels) if return_labels else out

    def apply_ln_to_stack(self, stack: torch.Tensor, side: str = "decoder") -> torch.Tensor:
        """Each part of `stack` (k, ..., d) as the final norm of `side` treats it inside the whole stream: centred
        (LayerNorm; RMSNorm has no mean) and divided by the whole stream's scale after the last layer, which the
        norm computes once for the sum (TransformerLens's apply_ln_to_stack). The norm's weight and bias are not
        applied: multiply by `model.<side>_final_ln.weight` (the bias belongs to the sum, not to a part)."""
        self._pre_norm("apply_ln_to_stack")
        norm = self.model.encoder_final_ln if side == "encoder" else self.model.decoder_final_ln
        stream = self[f"{side}.{self._layers(side) - 1}.hook_resid_post"]
        layer_norm = isinstance(norm, torch.nn.LayerNorm)
        if layer_norm:
            stack = stack - stack.mean(-1, keepdim=True)
            scale = (stream.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
        else:  # RMSNorm: the root mean square, no mean
            eps = norm.eps if norm.eps is not None else torch.finfo(stream.dtype).eps  # RMSNorm's own default
            scale = (stream.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        return stack / scale

    def to_trace(self, log_probs: torch.Tensor):
        """The app's record of this one sentence (model/records.py SentenceTrace: NumPy, the arrays the pages draw),
        read from this cache, which needs its attention and embedding points (run_with_cache keeps every point by
        default); `trace.point(name)` then answers by this cache's names."""
        from model.nn.trace import to_sentence_trace

        if self.src_lengths is not None or not self.has_batch_dim:
            raise ValueError("to_trace reads one sentence's cache, with its batch axis")
        return to_sentence_trace(self._data, log_probs, self.src_tokens, self.tgt_tokens)

    def remove_batch_dim(self) -> ActivationCache:
        """The same cache without the batch axis (a batch of one sentence only)."""
        if not self.has_batch_dim:
            return self
        sizes = {t.shape[0] for t in self._data.values()}
        if sizes - {1}:
            raise ValueError(f"remove_batch_dim needs a batch of one sentence, not {max(sizes)}")
        return ActivationCache({k: v[0] for k, v in self._data.items()}, self.model, self.src_tokens,
                               self.tgt_tokens, self.src_lengths, self.tgt_lengths, has_batch_dim=False)

    def to(self, device) -> ActivationCache:
        """The same cache with every tensor on `device`."""
        return ActivationCache({k: v.to(device) for k, v in self._data.items()}, self.model, self.src_tokens,
                               self.tgt_tokens, self.src_lengths, self.tgt_lengths, self.has_batch_dim)

    # --- helpers -----------------------------------------------------------------------------------------------
    def _layers(self, side: str) -> int:
        if side not in SIDES:
            raise ValueError(f"side is 'encoder' or 'decoder', not {side!r}")
        cfg = self.model.cfg
        return cfg.n_encoder_layers if side == "encoder" else cfg.n_decoder_layers

    def _pre_norm(self, what: str) -> None:
        if not self.model.cfg.norm_first:
            raise ValueError(f"{what} needs a pre-norm model: this one normalises the residual stream after each "
                             "sub-layer, so the stream is not a sum of its parts")

    def _embed_parts(self, side: str) -> tuple[list[str], list[torch.Tensor]]:
        """The embedding's parts of `side`'s stream: the scaled token embedding and the position embedding, or the
        normalised embedding as one part where the model normalises it (its parts are then no sum)."""
        prefix = "" if side == "encoder" else "decoder."
        cfg = self.model.cfg
        if cfg.embed_norm:
            return ["embed"], [self[f"{side}.0.hook_resid_pre"]]
        names = [("embed", "hook_embed")] + ([("pos_embed", "hook_pos_embed")] if cfg.position_table else [])
        return [label for label, _ in names], [self[prefix + point] for _, point in names]


def _layer_of(name: str) -> tuple:
    """Sort key: a name's layer numbers, so "decoder.10" follows "decoder.9"."""
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name))


def _mask(lengths: list[int] | None) -> torch.Tensor | None:
    if lengths is None:
        return None
    return torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
