"""Many figures of one kind, stored as one figure and the differences of the others: a lesson file stays small.

A lesson file holds the app's figures for every attention kind × layer × head, every decoding step and every
sentence. Written out whole, each figure repeats its layout, its axes and the chart look; but the figure of head 2
differs from that of head 1 only in its values and its title. So a pack stores one figure whole and each other as
a list of changes to a figure stored before it ("like"); values that come twice (a head's weights in the one-head
figure and in the all-heads figure) are stored once, in a pool. The page rebuilds any figure in a few lines of
JavaScript (:data:`PACK_JS`); :meth:`FigurePack.figure` rebuilds it in Python, so tests can check that every
rebuilt figure is exactly the figure the app would draw.

A change is ``[path]`` (delete) or ``[path, value]`` (set), ``path`` a list of dict keys and list indices; a
pooled value is written ``{"$": n}``.
"""

from __future__ import annotations

import copy
import json

import plotly.graph_objects as go

from viz import look
from viz.transport import figure_json

POOL_CHARS = 200  # a value whose JSON is at least this long goes to the pool (shorter ones cost less inline)


def figure_dict(fig: go.Figure) -> dict:
    """The figure as the page hands it to Plotly: the chart look written in (as the app draws it, see
    :mod:`viz.look`), numeric arrays as Plotly's typed arrays (base64 float32: about 5 characters a value)."""
    return look.bake(json.loads(figure_json(fig)))


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def diff(a, b, path: tuple = ()) -> list[list]:
    """The changes that turn ``a`` into ``b`` (JSON values): sets and deletes, each at the deepest path that
    keeps them short (a list of the same length is changed item by item only when that is shorter)."""
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        ops = [[list(path) + [k]] for k in a if k not in b]
        for k, v in b.items():
            ops += diff(a[k], v, path + (k,)) if k in a else [[list(path) + [k], v]]
        return ops
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and any(
            isinstance(v, (dict, list)) for v in b):
        ops = [op for i, (x, y) in enumerate(zip(a, b)) for op in diff(x, y, path + (i,))]
        if len(_dumps(ops)) < len(_dumps(b)):
            return ops
    return [[list(path), b]]


def apply(fig, ops: list[list]):
    """``fig`` (a JSON value) with the changes applied, in place; a change at the empty path replaces it."""
    for op in ops:
        *parents, last = op[0] if op[0] else [None]
        if last is None:
            fig = copy.deepcopy(op[1])
            continue
        node = fig
        for key in parents:
            node = node[key]
        if len(op) == 1:
            del node[last]
        else:
            node[last] = copy.deepcopy(op[1])
    return fig


class FigurePack:
    """Figures by name, each stored whole or as changes to one stored before it; see the module docstring."""

    def __init__(self) -> None:
        self.entries: list[dict] = []  # {"fig": value} or {"like": n, "ops": [...]}, pooled
        self.names: dict[str, int] = {}
        self.pool: list = []
        self._pooled: dict[str, int] = {}
        self._figs: list[dict] = []  # the plain figures, to diff the next ones against

    def add(self, name: str, fig: go.Figure | dict, like: str | None = None) -> None:
        """Store ``fig`` under ``name``, as changes to the figure named ``like`` when given."""
        if name in self.names:
            raise ValueError(f"a figure named {name!r} is already in the pack")
        d = figure_dict(fig) if isinstance(fig, go.Figure) else fig
        if like is None:
            entry = {"fig": self._pool(d)}
        else:
            base = self.names[like]
            entry = {"like": base, "ops": [[op[0], self._pool(op[1])] if len(op) == 2 else op
                                           for op in diff(self._figs[base], d)]}
        self.names[name] = len(self.entries)
        self.entries.append(entry)
        self._figs.append(d)

    def _pool(self, value):
        """``value`` with every long string or list (and every long value inside it) put in the pool once."""
        if isinstance(value, dict):
            return {k: self._pool(v) for k, v in value.items()}
        if isinstance(value, list):
            value = [self._pool(v) for v in value]
        if not isinstance(value, (str, list)):
            return value
        text = _dumps(value)
        if len(text) < POOL_CHARS:
            return value
        if text not in self._pooled:
            self._pooled[text] = len(self.pool)
            self.pool.append(value)
        return {"$": self._pooled[text]}

    def figure(self, name: str) -> dict:
        """The figure stored under ``name``, rebuilt as the page's JavaScript rebuilds it."""
        return self._build(self.names[name])

    def _build(self, n: int) -> dict:
        e = self.entries[n]
        if "fig" in e:
            return self._unpool(e["fig"])
        return apply(self._build(e["like"]), [[op[0], self._unpool(op[1])] if len(op) == 2 else op
                                              for op in e["ops"]])

    def _unpool(self, value):
        if isinstance(value, dict):
            if len(value) == 1 and "$" in value:
                return self._unpool(self.pool[value["$"]])
            return {k: self._unpool(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._unpool(v) for v in value]
        return value

    def to_dict(self) -> dict:
        """What the page holds: {"pool", "entries", "names"}."""
        return {"pool": self.pool, "entries": self.entries, "names": self.names}

    @classmethod
    def from_dict(cls, d: dict) -> FigurePack:
        """A pack read back from a page's data (:meth:`to_dict`): enough to rebuild its figures, not to add more."""
        pack = cls()
        pack.pool, pack.entries, pack.names = d["pool"], d["entries"], d["names"]
        return pack


# The page's side of the pack: figure(name) rebuilds a figure from window.PACK ({"pool", "entries", "names"}).
PACK_JS = """
function unpool(v) {
  if (Array.isArray(v)) return v.map(unpool);
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === "$") return unpool(PACK.pool[v.$]);
    const out = {};
    for (const k of keys) out[k] = unpool(v[k]);
    return out;
  }
  return v;
}
function build(n) {
  const e = PACK.entries[n];
  if ("fig" in e) return unpool(e.fig);
  let fig = build(e.like);
  for (const op of e.ops) {
    const path = op[0];
    if (path.length === 0) { fig = unpool(op[1]); continue; }
    let node = fig;
    for (const key of path.slice(0, -1)) node = node[key];
    const last = path[path.length - 1];
    if (op.length === 1) delete node[last];  // only dict keys are deleted: lists change whole or item by item
    else node[last] = unpool(op[1]);
  }
  return fig;
}
function figure(name) {
  if (!(name in PACK.names)) throw new Error("no figure named " + name);
  return build(PACK.names[name]);
}
"""
