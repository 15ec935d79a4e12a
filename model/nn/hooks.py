"""Named hook points: read or replace any activation of one call, by the names TransformerLens uses.

Every notable activation passes a point named as `encoder.0.attn.hook_pattern` (layers from 0; docs/hooks.md has
them all with their shapes). A `Hooks` object is what one call does there: forward hooks `fn(activation, name)` that
may return a replacement, and a cache of what passed. It is an argument of the call, never registered on a module:
one cached model serves every session of a server at once, and a module's hook would reach another user's request.
A call without hooks passes None and keeps the fused attention kernel.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]
FwdHooks = Sequence[tuple["str | Callable[[str], bool]", HookFn]]

# The attention kinds of the app (model/records.py KINDS) and the block that holds each.
ATTENTION = {"enc_self": "encoder.{}.attn", "dec_self": "decoder.{}.attn", "cross": "decoder.{}.cross_attn"}
# The points whose values need the attention written out (the fused kernel keeps no scores or pattern).
EXPLICIT = ("hook_scaled_scores", "hook_attn_scores", "hook_pattern")


def _matcher(spec) -> Callable[[str], bool]:
    """A name, a list of names or a predicate on names -> a predicate."""
    if callable(spec):
        return spec
    if isinstance(spec, str):
        return spec.__eq__
    names = frozenset(spec)
    return names.__contains__


class Hooks:
    """What one call does at the hook points: forward hooks, then the cache.

    At a point, the hooks whose name or predicate matches run in the order given; a returned tensor (same shape)
    replaces the activation for the rest of the pass. The cache then keeps what goes on, detached unless
    `detach=False`. `at(prefix)` is the same hooks seen from inside a block, which names its points alone.
    """

    __slots__ = ("_fwd", "_cache", "_keep", "_detach", "_plan", "prefix")

    def __init__(self, fwd_hooks: FwdHooks = (), cache: dict | None = None, names_filter=None, detach: bool = True):
        self._fwd = [(_matcher(name), fn) for name, fn in fwd_hooks]
        self._cache = cache
        self._keep = (lambda name: True) if names_filter is None else _matcher(names_filter)
        self._detach = detach
        self._plan: dict[str, tuple[list[HookFn], bool]] = {}  # per full name: (its hooks, cached?)
        self.prefix = ""

    def at(self, prefix: str) -> Hooks:
        """The same hooks and cache, with names inside `prefix` (e.g. "encoder.2" then "attn")."""
        inner = object.__new__(Hooks)
        inner._fwd, inner._cache, inner._keep, inner._detach, inner._plan = (
            self._fwd, self._cache, self._keep, self._detach, self._plan)
        inner.prefix = f"{self.prefix}{prefix}."
        return inner

    def _for(self, name: str) -> tuple[list[HookFn], bool]:
        plan = self._plan.get(name)
        if plan is None:
            plan = ([fn for match, fn in self._fwd if match(name)], self._cache is not None and self._keep(name))
            self._plan[name] = plan
        return plan

    def wants(self, *names: str) -> bool:
        """Whether any of these points (inside this prefix) has a hook or goes into the cache."""
        return any(any(self._for(self.prefix + n)) for n in names)

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        full = self.prefix + name
        fns, keep = self._for(full)
        for fn in fns:
            y = fn(x, full)
            if y is not None:
                if y.shape != x.shape:
                    raise ValueError(f"a hook on {full} returned shape {tuple(y.shape)}, not {tuple(x.shape)}")
                x = y
        if keep:
            self._cache[full] = x.detach() if self._detach else x
        return x


def inside(hooks: Hooks | None, prefix: str) -> Hooks | None:
    return None if hooks is None else hooks.at(prefix)


def attn_name(kind: str, layer: int, point: str) -> str:
    """The full name of an attention point: attn_name("cross", 1, "hook_z") = "decoder.1.cross_attn.hook_z"."""
    return ATTENTION[kind].format(layer) + "." + point


def hook_names(cfg) -> list[str]:
    """Every point of a model with this config, in the order a pass reaches them."""
    attn = lambda a: [f"{a}.{p}" for p in ("hook_q", "hook_k", "hook_v", *EXPLICIT, "hook_z")]  # noqa: E731
    mlp = ["mlp.hook_pre", *["mlp.hook_pre_linear"] * getattr(cfg, "ff_gated", False), "mlp.hook_post",
           "hook_mlp_out", "hook_resid_post"]
    enc = ["hook_resid_pre", *attn("attn"), "hook_attn_out", "hook_resid_mid", *mlp]
    dec = enc[:10] + attn("cross_attn") + ["hook_cross_attn_out", "hook_resid_mid_cross"] + mlp
    relative = getattr(cfg, "positions", "sinusoidal") == "relative"
    embed = (["hook_token_embed", "hook_embed"] + ["hook_pos_embed"] * (not relative)
             + ["embed_ln.hook_normalized"] * getattr(cfg, "embed_norm", False) + ["hook_pos_bias"] * relative)
    return (embed + [f"encoder.{l}.{p}" for l in range(cfg.n_encoder_layers) for p in enc]
            + ["encoder_final_ln.hook_normalized"] * cfg.norm_first + [f"decoder.{p}" for p in embed]
            + [f"decoder.{l}.{p}" for l in range(cfg.n_decoder_layers) for p in dec]
            + ["decoder_final_ln.hook_normalized"] * cfg.norm_first)


def check_names(cfg, fwd_hooks: FwdHooks) -> None:
    """ValueError for a hook named by a string that is no point of this model (a typo would otherwise do nothing)."""
    named = [name for name, _ in fwd_hooks if isinstance(name, str)]
    known = set(hook_names(cfg)) if named else set()  # every translation passes here: no list without a name
    for name in named:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            raise ValueError(f"{name!r} is not a hook point of this model" +
                             (f"; did you mean {', '.join(close)}?" if close else " (see docs/hooks.md)"))


def gate_hooks(gates: dict[str, torch.Tensor]) -> list[tuple[str, HookFn]]:
    """Hooks that multiply each head's output before W_O (`hook_z`, (b, i, h, d_head)) by a gate.

    `gates`: kind -> (L, h), one gate per head, or (L, b, h), one per batch row and head: 1 keeps a head, 0
    switches it off (Michel et al. 2019's ξ; gates that require grad give dL/dξ). A layer whose gates are all 1
    and need no gradient gets no hook: the product would change nothing.
    """
    return [(attn_name(kind, l, "hook_z"), lambda z, name, g=g[l]: z * g.view(-1, 1, z.shape[2], 1).to(z.dtype))
            for kind, g in gates.items() for l in range(g.shape[0])
            if g.requires_grad or not bool((g[l] == 1).all())]


def off_gates(cfg, off: Iterable[tuple[str, int, int]]) -> dict[str, torch.Tensor]:
    """kind -> (L, h) gates with the given (kind, 0-based layer, 0-based head) at 0, every other head at 1; ValueError
    for a head the model does not have."""
    off = list(off)
    layers = cfg.kind_layers
    for item in off:
        try:
            kind, layer, head = item
        except (TypeError, ValueError):
            raise ValueError(f"off_heads holds (kind, layer, head) triples, got {item!r}") from None
        if kind not in layers:
            raise ValueError(f"unknown attention kind {kind!r}: use one of {', '.join(layers)}")
        for name, value, n in (("layer", layer, layers[kind]), ("head", head, cfg.n_heads)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < n:
                raise ValueError(f"{kind} {name} {value!r} is out of range: 0-based, 0 to {n - 1}")
    gates = {kind: torch.ones(n, cfg.n_heads) for kind, n in cfg.kind_layers.items()}
    for kind, layer, head in off:
        gates[kind][int(layer), int(head)] = 0.0
    return gates
