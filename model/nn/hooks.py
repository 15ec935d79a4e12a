"""Named hook points: read or replace any activation of one call, by the names TransformerLens uses.

Every notable activation passes a point named as `encoder.0.attn.hook_pattern` (layers from 0; docs/hooks.md has
them all with their shapes). A `Hooks` object is what one call does there: forward hooks `fn(activation, hook)` that
may return a replacement (`hook` is the point's name, a str with TransformerLens's `hook.name`), and a cache of what
passed. It is an argument of the call, never registered on a module:
one cached model serves every session of a server at once, and a module's hook would reach another user's request.
A call without hooks passes None and keeps the fused attention kernel.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch

HookFn = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]
FwdHooks = Sequence[tuple["str | Callable[[str], bool]", HookFn]]

# The attention kinds of the app (model/records.py KINDS) and the block that holds each.
ATTENTION = {"enc_self": "encoder.{}.attn", "dec_self": "decoder.{}.attn", "cross": "decoder.{}.cross_attn"}
# The points whose values need the attention written out (the fused kernel keeps no scores or pattern).
EXPLICIT = ("hook_scaled_scores", "hook_attn_scores", "hook_pattern")


class HookPoint(str):
    """A point's name as a hook receives it: a str, so `fn(x, name)` code keeps working, with TransformerLens's
    `hook.name`, so `fn(x, hook)` code written for TransformerLens runs unchanged."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return str(self)


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
        self._fwd = [(_matcher(name), fn) for name, fn in as_hook_list(fwd_hooks)]
        self._cache = cache
        self._keep = (lambda name: True) if names_filter is None else _matcher(names_filter)
        self._detach = detach
        self._plan: dict[str, tuple[list[HookFn], bool, HookPoint]] = {}  # per full name: (hooks, cached?, point)
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
            plan = ([fn for match, fn in self._fwd if match(name)], self._cache is not None and self._keep(name),
                    HookPoint(name))
            self._plan[name] = plan
        return plan

    def wants(self, *names: str) -> bool:
        """Whether any of these points (inside this prefix) has a hook or goes into the cache."""
        return any(any(self._for(self.prefix + n)[:2]) for n in names)

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        full = self.prefix + name
        fns, keep, point = self._for(full)
        for fn in fns:
            y = fn(x, point)
            if y is not None:
                x = _checked(y, x, point)
        if keep:
            self._cache[full] = x.detach() if self._detach else x
        return x


def _checked(y, x: torch.Tensor, point: str) -> torch.Tensor:
    """A hook's return, if it can stand for the activation (a tensor of its shape, dtype and device)."""
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"the hook on {point} returned a {type(y).__name__}, not a torch.Tensor: return the "
                        "activation (changed in place or new), or None to leave it")
    for what, got, want in (("shape", tuple(y.shape), tuple(x.shape)), ("dtype", y.dtype, x.dtype),
                            ("device", y.device, x.device)):
        if got != want:
            raise ValueError(f"the hook on {point} returned {what} {got}, not the activation's {want}")
    return y


def as_hook_list(fwd_hooks) -> list:
    """`fwd_hooks` as a list of (name or predicate, fn) pairs: one pair alone is taken as a list of one; anything
    else that is not such pairs is refused, saying what was given."""
    if fwd_hooks is None:
        return []
    if isinstance(fwd_hooks, tuple) and len(fwd_hooks) == 2 and callable(fwd_hooks[1]) and (
            isinstance(fwd_hooks[0], str) or callable(fwd_hooks[0])):
        return [fwd_hooks]  # one (name, fn) pair, not a list of them
    if isinstance(fwd_hooks, (str, dict)) or not isinstance(fwd_hooks, Iterable):
        raise TypeError(f"fwd_hooks is a list of (name, fn) pairs, not a {type(fwd_hooks).__name__}")
    out = list(fwd_hooks)
    for i, item in enumerate(out):
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and callable(item[1])
                and (isinstance(item[0], (str, list, tuple, frozenset, set)) or callable(item[0]))):
            raise TypeError(f"fwd_hooks[{i}] is {item!r:.80}: each hook is a (name or predicate, fn) pair")
    return out


def inside(hooks: Hooks | None, prefix: str) -> Hooks | None:
    return None if hooks is None else hooks.at(prefix)


def attn_name(kind: str, layer: int, point: str) -> str:
    """The full name of an attention point: attn_name("cross", 1, "hook_z") = "decoder.1.cross_attn.hook_z"."""
    return ATTENTION[kind].format(layer) + "." + point


def module_points(module, prefix: str = "") -> list[str]:
    """Every point a module makes, with its path, in the order a pass reaches them: what its `hook_points()`
    declares, where a child module's name stands for that child's points (`attn` -> `attn.hook_q`, ...)."""
    children = dict(module.named_children())
    out = []
    for item in module.hook_points():
        child = children.get(item)
        out += [prefix + item] if child is None else module_points(child, f"{prefix}{item}.")
    return out


def _unknown(name: str, known) -> ValueError:
    close = difflib.get_close_matches(name, known, n=3)
    return ValueError(f"{name!r} is not a hook point of this model" +
                      (f"; did you mean {', '.join(close)}?" if close else " (see docs/hooks.md)"))


def check_names(points: list[str], fwd_hooks: FwdHooks) -> None:
    """ValueError for a hook named by a string that is none of the model's `points` (model.nn.transformer's
    hook_names; a typo would otherwise do nothing)."""
    named = [n for spec, _ in as_hook_list(fwd_hooks) if not callable(spec)
             for n in ([spec] if isinstance(spec, str) else spec)]
    known = set(points) if named else set()
    for name in named:
        if name not in known:
            raise _unknown(name, known)


def check_filter(points: list[str], names_filter) -> None:
    """A cache's `names_filter` (None: every point; a name; names; a predicate on names) checked as hook names are:
    a name that is no point, or a predicate that keeps none, raises, with the close matches."""
    if names_filter is None:
        return
    known = points
    if callable(names_filter):
        if not any(names_filter(n) for n in known):
            raise ValueError("names_filter keeps no hook point of this model (see docs/hooks.md)")
        return
    if not isinstance(names_filter, (str, list, tuple, set, frozenset)):
        raise TypeError(f"names_filter is a name, a list of names or a predicate, not a {type(names_filter).__name__}")
    for name in [names_filter] if isinstance(names_filter, str) else names_filter:
        if name not in known:
            raise _unknown(name, known)


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
