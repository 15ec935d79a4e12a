"""A Translator's research surface, as TransformerLens's: run_with_cache, run_with_hooks, tokens, weights.

One teacher-forcing convention for every method (docs/hooks.md): the rows of a pass score `target` followed by the
end token `</s>` (not added again where the target ends with it; `eos=False`: the target's own last token ends the
rows, as for a translation cut at its length limit). The decoder reads the start token, the forced target-language
token where the model has one (not added again where the target starts with it), then every scored token but the
last. So row n scores labels[n], and a target of k tokens gives k + 1 rows (k with `eos=False`), plus one per
language token.

Text is a sentence or a list of them (a batch: padded on the right, each row's length in the cache). A target is
None (the model's own greedy translation, no hooks), a string (tokenised as the model reads it), a list of tokens,
or one of those per sentence.
"""
from __future__ import annotations

import torch

from model.inference.decode import greedy_decode
from model.nn.cache import ActivationCache
from model.nn.hooks import Hooks, as_hook_list, check_filter, check_names
from model.nn.transformer import RETURN_TYPES, hook_names

LEAVES = ("hook_token_embed", "decoder.hook_token_embed")  # where a pass with grad=True starts its graph


class Research:
    """Mixed into Translator (model/inference/translator.py), whose model, vocabularies and tokenizers it uses."""

    def to_str_tokens(self, text: str, side: str = "source") -> list[str]:
        """The tokens of `text` as the model reads it: the source side with its language token and `</s>`, or the
        target side's pieces (`side="target"`)."""
        if side == "target":
            return list(self.target_tokens(text))
        source = self.prepare(text)
        return list(source.axis_tokens)

    def forced_tensors(self, text, target=None, eos: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """(src (b, s), decoder input (b, T)) of the convention above, right-padded."""
        return self._forced(text, target, eos)[:2]

    def _forced(self, text, target, eos: bool):
        """forced_tensors, then each row's source and decoder lengths."""
        if isinstance(text, str):
            texts, targets = [text], [target]
        else:
            texts = list(text)
            if not texts or not all(isinstance(t, str) for t in texts):
                raise TypeError("text is a sentence (str) or a list of sentences")
            if isinstance(target, str):
                raise TypeError("a batch's target is None (each sentence's greedy translation) or one per sentence")
            targets = [None] * len(texts) if target is None else list(target)
            if len(targets) != len(texts):
                raise ValueError(f"{len(texts)} sentences but {len(targets)} targets")
        rows = [self._forced_row(t, g, eos) for t, g in zip(texts, targets)]
        pad = self.cfg.pad_idx
        src = _padded([r[0] for r in rows], pad)
        tgt = _padded([r[1] for r in rows], pad)
        return src, tgt, [len(r[0]) for r in rows], [len(r[1]) for r in rows]

    def _forced_row(self, text: str, target, eos: bool) -> tuple[list[int], list[int]]:
        source = self.prepare(text)
        if not source.tokens:
            raise ValueError(f"the text has no tokens the model reads ({text[:40]!r})" if text.strip() else
                             "the text has no tokens the model reads")
        v = self.tgt_vocab
        if (isinstance(target, str) and target in self._point_names()) or callable(target) or (
                isinstance(target, (list, tuple)) and not all(isinstance(t, str) for t in target)):
            raise TypeError(f"target {target!r:.60} is not a translation: names_filter and fwd_hooks are keyword "
                            "arguments (run_with_cache(text, names_filter=...), run_with_hooks(text, fwd_hooks=...))")
        if target is None:
            with torch.inference_mode():
                dec = greedy_decode(self.model, self._src_tensor(source), v.bos_idx, v.eos_idx,
                                    self.max_steps(source, None), self.start_prefix)
            ids = list(dec.ids)
        else:
            ids = v.encode(self.target_tokens(target) if isinstance(target, str) else list(target))
        if ids[: len(self.start_prefix)] != self.start_prefix:
            ids = self.start_prefix + ids
        labels = ids + ([v.eos_idx] if eos and (not ids or ids[-1] != v.eos_idx) else [])
        if not labels:
            raise ValueError("needs at least one target token")
        return source.ids, [v.bos_idx] + labels[:-1]

    def _point_names(self) -> set[str]:
        return set(hook_names(self.cfg))

    def run_with_cache(self, text, target=None, *, names_filter=None, fwd_hooks=(), return_type: str = "log_probs",
                       eos: bool = True, grad: bool = False, remove_batch_dim: bool = False):
        """((b, T, V) log-probabilities or logits, ActivationCache) of the teacher-forced pass above, after any
        `fwd_hooks` [(name or predicate, fn(activation, hook))]; the cache keeps the points `names_filter` keeps (a
        name, names or a predicate; all by default). `grad=True`: the cache's tensors stay in the autograd graph
        (otherwise the pass runs under inference mode, which is faster)."""
        check_filter(hook_names(self.cfg), names_filter)
        src, tgt, src_len, tgt_len = self._forced(text, target, eos)
        cache: dict[str, torch.Tensor] = {}
        # with grad, both token embeddings become leaves that need a gradient, so every activation after them is in
        # the graph even where the model's weights need none (a loaded model's are frozen)
        leaves = [(LEAVES, lambda x, hook: x.detach().requires_grad_(True))] if grad else []
        out = self._run(src, tgt, Hooks(leaves + self._hooks(fwd_hooks), cache, names_filter, detach=not grad),
                        return_type, grad)
        one = isinstance(text, str)
        v, sv = self.tgt_vocab, self.src_vocab
        src_tokens = [sv.decode(r[:n]) for r, n in zip(src.tolist(), src_len)]
        tgt_tokens = [v.decode(r[:n]) for r, n in zip(tgt.tolist(), tgt_len)]
        made = ActivationCache(cache, self.model, src_tokens[0] if one else src_tokens,
                               tgt_tokens[0] if one else tgt_tokens, None if one else src_len,
                               None if one else tgt_len)
        return (out[0], made.remove_batch_dim()) if remove_batch_dim else (out, made)

    def run_with_hooks(self, text, target=None, *, fwd_hooks=(), return_type: str = "log_probs", eos: bool = True,
                       grad: bool = False, reset_hooks_end: bool = True) -> torch.Tensor:
        """(b, T, V) log-probabilities or logits of the teacher-forced pass above with `fwd_hooks`. Hooks here hold
        for this call only (they are its argument, never registered on a module): `reset_hooks_end` is always so."""
        if not reset_hooks_end:
            raise ValueError("hooks hold for one call only here (one model serves every user of a server): pass "
                             "them to each call")
        src, tgt = self.forced_tensors(text, target, eos)
        return self._run(src, tgt, Hooks(self._hooks(fwd_hooks)), return_type, grad)

    def _hooks(self, fwd_hooks) -> list:
        fwd = as_hook_list(fwd_hooks)
        check_names(hook_names(self.cfg), fwd)
        return fwd

    def _run(self, src, tgt, hooks: Hooks, return_type: str, grad: bool) -> torch.Tensor:
        if return_type not in RETURN_TYPES:
            raise ValueError(f"return_type is one of {', '.join(RETURN_TYPES)}, not {return_type!r}")
        with torch.enable_grad() if grad else torch.inference_mode():
            return self.model(src, tgt, hooks, return_type=return_type)

    # --- weights, as TransformerLens shapes them (views of the model's own) ------------------------------------
    @property
    def W_U(self) -> torch.Tensor:
        """(d, V): the generator's weight, a view (the pass also multiplies by cfg.generator_scale first: T5)."""
        return self.model.generator.proj.weight.T

    @property
    def b_U(self) -> torch.Tensor:
        """(V,): the final logits bias (zeros where the model has none)."""
        bias = self.model.generator.proj.bias
        return bias if bias is not None else torch.zeros(self.cfg.tgt_vocab_size)


def _padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out
