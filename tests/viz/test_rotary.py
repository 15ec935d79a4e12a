"""viz/rotary.py: the rotation as Hugging Face's rotate_half writes it, and the score's dependence on the distance
alone, checked against torch's own rotation of the network (model/nn/rotary.py)."""
from __future__ import annotations

import numpy as np
import pytest

from viz.rotary import (
    angles,
    distance_figure,
    frequency_figure,
    pairs,
    rotate,
    score_by_distance,
    turn_figure,
    turned,
    wrap,
)

BASE = 10000.0


def test_rotation_equals_the_networks():
    torch = pytest.importorskip("torch")
    from model.nn.rotary import rotary_cos_sin
    from model.nn.rotary import rotate as net_rotate

    x = np.random.default_rng(0).normal(size=(7, 16))
    cos, sin = rotary_cos_sin(7, 3, 16, BASE, torch.zeros(1, dtype=torch.float64))
    theirs = net_rotate(torch.tensor(x)[None, None], cos.double(), sin.double())[0, 0].numpy()
    # the network's angles p·θ and their cos, sin are float32: each rounds by about p·ε of a value's size
    tol = 4 * (10 + 2) * np.finfo(np.float32).eps * np.abs(x).max()
    assert np.abs(rotate(x, np.arange(3, 10), BASE) - theirs).max() <= tol


def test_each_pair_keeps_its_length_and_turns_by_the_formula():
    x = np.random.default_rng(1).normal(size=(5, 8))
    out = rotate(x, np.arange(5), BASE)
    assert np.allclose(np.abs(pairs(out)), np.abs(pairs(x)))
    for p in range(5):
        assert np.allclose(wrap(turned(x[p], out[p]) - angles(np.array([p]), 8, BASE)[0]), 0.0, atol=1e-9)


def test_the_score_depends_on_the_distance_only():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=16), rng.normal(size=16)
    n = 12
    rq, rk = rotate(np.tile(q, (n, 1)), np.arange(n), BASE), rotate(np.tile(k, (n, 1)), np.arange(n), BASE)
    scores = rq @ rk.T  # (query position, key position)
    distances = np.arange(-(n - 1), n)
    by_distance = score_by_distance(q, k, BASE, distances)
    for m in range(n):
        for j in range(n):
            assert abs(scores[m, j] - by_distance[m - j + n - 1]) < 1e-9
    assert not np.allclose(by_distance, by_distance[0])  # it does depend on the distance


def test_figures_draw_what_they_are_given():
    fig = frequency_figure(20, 8, BASE)
    assert fig.data[0].z.shape == (4, 20)  # pairs down, positions across
    x = np.random.default_rng(3).normal(size=8)
    after = rotate(x[None], np.array([4]), BASE)[0]
    fig = turn_figure({"query": turned(x, after)}, angles(np.array([4]), 8, BASE)[0], "t")
    assert len(fig.data) == 2 and np.allclose(fig.data[1].y, turned(x, after))
    d = np.arange(-3, 4)
    s = score_by_distance(x, x, BASE, d)
    fig = distance_figure(d, s, np.arange(3), np.full(3, s[4]), 1, "t")
    assert fig.data[-1].x[0] == 1 and fig.data[-1].y[0] == pytest.approx(s[4])  # this pair marked
