"""viz/token_axes.py: labels thinned for space keep the ones that matter (kept_ticks, axis_ticks' ``keep``) without
drawing two labels over each other, and value axes get round ticks no closer than a line of labels (value_ticks)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from viz.theme import DEFAULT_THEME, PRESENTER_THEME, using_theme
from viz.token_axes import axis_ticks, kept_ticks, tick_step, value_ticks


def words(n: int) -> list[str]:
    return [f"w{i}" for i in range(n)]


def test_a_kept_position_that_the_step_would_drop_keeps_its_label_and_pushes_out_its_neighbours():
    assert 4 not in range(0, 20, 3)  # a plain step of 3 drops position 4
    ticks = kept_ticks(20, 3, keep=[4])
    assert 4 in ticks
    assert 3 not in ticks and 6 not in ticks  # 1 and 2 positions away: they would overlap it
    assert [t for t in ticks if t != 4] == [i for i in range(0, 20, 3) if abs(i - 4) >= 3]
    assert min(b - a for a, b in zip(ticks, ticks[1:])) >= 3


def test_kept_positions_out_of_range_are_ignored_and_the_first_of_two_that_collide_wins():
    assert kept_ticks(10, 2, keep=[-1, 10, 99]) == list(range(0, 10, 2))
    ticks = kept_ticks(20, 4, keep=[9, 10, 15])
    assert 9 in ticks and 10 not in ticks and 15 in ticks  # 10 would overlap 9, kept first; 15 stands apart
    assert ticks == [0, 4, 9, 15]  # 8 and 12 would overlap the kept 9 and 15, 16 the kept 15
    assert min(b - a for a, b in zip(ticks, ticks[1:])) >= 4


def test_the_regular_labels_stand_closer_to_a_kept_one_only_as_the_pixels_allow():
    # A step of 5 from the count rule; labels may stand 2 positions apart by the pixels.
    ticks = kept_ticks(30, 5, keep=[12], apart=2)
    assert ticks == [0, 5, 10, 12, 15, 20, 25]


@pytest.mark.parametrize("theme", [DEFAULT_THEME, PRESENTER_THEME], ids=["default", "presenter"])
def test_axis_ticks_keep_the_label_and_never_crowd_it(theme):
    rng = np.random.default_rng(0)
    with using_theme(theme):
        for _ in range(200):
            n = int(rng.integers(2, 120))
            axis_px = float(rng.uniform(60, 900))
            angle = [None, -45, -90][int(rng.integers(3))]
            keep = [int(k) for k in rng.integers(0, n, size=int(rng.integers(1, 3)))]
            toks = words(n)
            out = axis_ticks(toks, n, angle=angle, axis_px=axis_px, keep=keep)
            ticks = out["tickvals"]
            assert keep[0] in ticks, (n, axis_px, angle, keep)
            assert out["ticktext"] == [toks[i] for i in ticks]
            slant = abs(math.sin(math.radians(out.get("tickangle") or 0))) if out.get("tickangle") else 1.0
            px = [(b - a) * axis_px / n * slant for a, b in zip(ticks, ticks[1:])]
            assert not px or min(px) >= theme.min_tick_px - 1e-9, (n, axis_px, angle, keep, ticks)
            assert out["tickfont"]["size"] >= theme.min_tick


def test_without_keep_axis_ticks_thin_as_before():
    toks = words(65)
    out = axis_ticks(toks, 65, axis_px=65 * 7)
    step = tick_step(65, 65 * 7)
    assert out["tickvals"] == list(range(0, 65, step)) and out["ticktext"] == toks[::step]


@pytest.mark.parametrize("lo,hi,px", [(-0.44, 0.44, 200), (0, 0.37, 120), (-3.3, 3.3, 48), (0, 1.15, 300),
                                       (-0.011, 0.011, 70), (0, 2e-4, 90), (-50, 50, 30)])
def test_value_ticks_are_round_inside_the_range_and_a_line_apart(lo, hi, px):
    with using_theme(PRESENTER_THEME):
        ticks = value_ticks(lo, hi, px)
        apart = max(PRESENTER_THEME.min_tick_px, 1.2 * PRESENTER_THEME.tick)
    assert ticks and all(lo <= t <= hi for t in ticks)
    assert (0.0 in ticks) == (lo <= 0 <= hi)
    per = px / (hi - lo)
    assert all((b - a) * per >= apart - 1e-9 for a, b in zip(ticks, ticks[1:]))
    assert len(ticks) <= 6
    assert all(t == float(f"{t:.2g}") for t in ticks)  # round: at most two significant digits


def test_value_ticks_give_two_labels_where_a_plot_has_room_and_one_where_it_has_none():
    with using_theme(PRESENTER_THEME):
        assert value_ticks(-0.44, 0.44, 200) == [-0.4, -0.2, 0.0, 0.2, 0.4]
        assert value_ticks(-0.44, 0.44, 50) == [-0.44, 0.0, 0.44]  # the ends, rounded in
        assert value_ticks(-0.44, 0.44, 20) == [0.0]
