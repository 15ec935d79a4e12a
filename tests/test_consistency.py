"""viz/ recomputes a few things without torch; they must equal what the model computes."""
from __future__ import annotations

import numpy as np
import pytest

from model.nn.layers import sinusoidal_encoding as model_pe
from viz.positional import sinusoidal_encoding as viz_pe


@pytest.mark.parametrize("layout", ["interleaved", "sin_then_cos"])  # the paper's, and Marian's
@pytest.mark.parametrize("n, d", [(50, 32), (256, 256), (7, 6), (9, 7)])
def test_positional_encodings_agree(n, d, layout):
    # torch computes the paper's layout in float32: sin of arguments up to ~250 rad carries ~3e-5 of rounding.
    model, drawn = model_pe(n, d, layout).numpy(), viz_pe(n, d, layout)
    assert model.shape == drawn.shape == (n, d)
    assert np.allclose(model, drawn, atol=1e-4)


def test_the_two_layouts_differ():
    """So the test above could tell them apart."""
    assert not np.allclose(viz_pe(10, 8, "interleaved"), viz_pe(10, 8, "sin_then_cos"), atol=1e-2)
