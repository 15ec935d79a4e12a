"""Every number the analyses give for fixed inputs equals the one recorded in tests/data/reference/ (see
tests/reference_outputs.py): the shipped piece and word models and a tiny imported Marian model."""
from __future__ import annotations

import numpy as np
import pytest

from model.inference.translator import Translator
from reference_outputs import MODELS, REFERENCE, outputs


@pytest.mark.parametrize("name", list(MODELS))
def test_outputs_equal_the_recorded_ones(name):
    recorded = np.load(REFERENCE / f"{name}.npz")
    now = outputs(Translator.from_checkpoint(MODELS[name], draft=False))
    assert sorted(now) == sorted(recorded.files)
    for key in recorded.files:
        np.testing.assert_allclose(now[key], recorded[key], rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=key)
