"""viz/ recomputes a few things without torch; they must equal what the model computes."""
from __future__ import annotations

import numpy as np
import pytest

from model.layers import sinusoidal_encoding as model_pe
from viz.positional import sinusoidal_encoding as viz_pe


@pytest.mark.parametrize("n, d", [(50, 32), (256, 256), (7, 6)])
def test_positional_encodings_agree(n, d):
    # torch computes in float32: sin of arguments up to ~250 rad carries ~3e-5 of rounding.
    assert np.allclose(model_pe(n, d).numpy(), viz_pe(n, d), atol=1e-4)
