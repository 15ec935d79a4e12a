"""views/plumbing/figcache.py: kept figures, and the name each one's content gets in the browser (its datarevision)."""
from __future__ import annotations

import json

import numpy as np

from views.plumbing.figcache import FigureCache, drawable
from viz.attention import attention_figure

TOKS = ["<bos>", "▁A", "▁dog"]


def _revision(fig) -> str:
    return json.loads(fig.to_dict().json)["layout"]["datarevision"]


def test_equal_content_shares_a_name_and_other_content_gets_another():
    cache = FigureCache()
    p = np.full((3, 3), 1 / 3, np.float32)
    a = cache.get(attention_figure, p, TOKS, TOKS, "enc_self")
    again = cache.get(attention_figure, p.copy(), list(TOKS), TOKS, "enc_self")  # equal content, other objects
    assert again is a and cache.hits == 1
    other = cache.get(attention_figure, p * np.float32(0.5), TOKS, TOKS, "enc_self")
    titled = cache.get(attention_figure, p, TOKS, TOKS, "enc_self", title="layer 1, head 1")
    names = {_revision(f) for f in (a, other, titled)}
    assert len(names) == 3  # a chart handed another figure is drawn again


def test_a_figure_built_outside_the_cache_gets_a_name_of_its_own_each_time():
    p = np.full((3, 3), 1 / 3, np.float32)
    one, two = (drawable(attention_figure(p, TOKS, TOKS, "enc_self")),
                drawable(attention_figure(p, TOKS, TOKS, "enc_self")))
    assert _revision(one) != _revision(two)
    assert drawable(one) is one  # prepared once
    assert json.loads(one.to_dict().json)["data"][0]["z"] == p.tolist()  # plain lists, the values as they are
