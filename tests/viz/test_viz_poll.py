"""The live poll's figures: the room's counts as they arrive, and after the reveal the room's share beside the
model's values on one 0..1 axis, the model's answer highlighted; options are text, never markup."""
from __future__ import annotations

import numpy as np
import pytest

from viz.poll import room_and_model_figure, room_figure, shares


def test_shares_are_fractions_of_all_answers_and_zero_before_any():
    assert shares([2, 1, 1]) == [0.5, 0.25, 0.25]
    assert shares([0, 0]) == [0.0, 0.0]


def test_the_rooms_bars_count_students_per_option_in_display_order():
    fig = room_figure(["dog", "<b>cat</b>", "bird"], [3, 0, 1])
    bar = fig.data[0]
    assert list(bar.x) == [3, 0, 1] and list(bar.text) == ["3", "0", "1"]
    assert "<b>" not in " ".join(fig.layout.yaxis.ticktext)  # markup shown as text
    assert fig.layout.xaxis.range[1] >= 5  # the first answers do not fill the axis
    assert room_figure(["a"], [40]).layout.xaxis.range[1] >= 40
    assert room_figure(["a", "b"], [1, 2], title=None, height=110).layout.height == 110
    with pytest.raises(ValueError, match="2 options but 3 counts"):
        room_figure(["a", "b"], [1, 2, 3])


def test_the_reveal_puts_the_rooms_share_beside_the_models_values():
    fig = room_and_model_figure(["dog", "cat", "bird"], [1, 3, 0], [0.7, 0.2, 0.1], answer=0)
    model, room = fig.data
    np.testing.assert_allclose(model.x, [0.7, 0.2, 0.1])
    np.testing.assert_allclose(room.x, [0.25, 0.75, 0.0])
    assert list(room.text) == ["25 %", "75 %", "0 %"]
    colours = list(model.marker.color)
    assert colours[0] != colours[1] == colours[2]  # the model's answer stands out
    with pytest.raises(ValueError, match="answer 3"):
        room_and_model_figure(["a", "b"], [1, 1], [0.5, 0.5], answer=3)
    with pytest.raises(ValueError, match="values"):
        room_and_model_figure(["a", "b"], [1, 1], [0.5], answer=0)


def test_the_projectors_strip_hides_the_count_axis_and_the_reveal_takes_a_height():
    """Below the question, a projector has a strip: the bars write their counts, the axis goes; after the reveal
    the room-and-model figure takes the height the page leaves it."""
    from viz.theme import PRESENTER_THEME, using_theme

    with using_theme(PRESENTER_THEME):
        strip = room_figure(["a", "b", "c"], [2, 0, 1], title=None, height=128, axis=False)
    assert strip.layout.xaxis.visible is False and strip.layout.height == 128
    assert list(strip.data[0].text) == ["2", "0", "1"] and strip.layout.yaxis.tickfont.size >= 20
    assert room_figure(["a", "b"], [1, 1]).layout.xaxis.visible is True
    assert room_and_model_figure(["a", "b"], [1, 1], [0.7, 0.3], 0, height=300).layout.height == 300
