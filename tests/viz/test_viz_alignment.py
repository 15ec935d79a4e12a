"""viz.alignment: the word-level matrix with the gold links as squares and the predicted ones as dots, each at its
cell, and the figure's text alternative counting them."""
from __future__ import annotations

import numpy as np

from viz.alignment import alignment_figure
from viz.alt import describe


def test_links_are_drawn_at_their_cells_and_counted_in_words():
    m = np.array([[0.9, 0.1, 0.0], [0.2, 0.1, 0.7]])  # 2 target words × 3 source words
    fig = alignment_figure(m, ["Ein", "Hund", "läuft"], ["A", "dog"], sure={(0, 0)}, possible={(0, 0), (2, 1)},
                           predicted={(0, 0), (2, 1)}, title="pair 1", measure="weight")
    heat, sure, possible, predicted = fig.data
    assert list(sure.x) == [heat.x[0]] and list(sure.y) == [heat.y[0]]
    assert list(possible.x) == [heat.x[2]] and list(possible.y) == [heat.y[1]]  # possible ones not also sure
    assert sorted(zip(predicted.x, predicted.y)) == sorted([(heat.x[0], heat.y[0]), (heat.x[2], heat.y[1])])
    assert [t.name for t in fig.data[1:]] == ["gold: sure", "gold: possible", "predicted"]
    alt = describe(fig)
    assert "1 gold: sure, 1 gold: possible, 2 predicted links" in alt.summary
    assert "predicted: A – Ein, dog – läuft" in alt.details
