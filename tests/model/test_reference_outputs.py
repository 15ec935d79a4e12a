"""Every number the analyses give for fixed inputs equals the one recorded in tests/data/reference/ (see
tests/reference_outputs.py): the shipped piece and word models and a tiny imported Marian model.

Both sides run the model in float64, so that the recording holds on any processor (float32 kernels sum in an order
of their own per instruction set), and compare within `tolerance`, which that module derives from the roundings each
value goes through. The second test shows that this tolerance still sees a real change."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reference_outputs import MODELS, REFERENCE, load, mismatches, outputs


@pytest.mark.slow  # every recorded analysis, in float64
@pytest.mark.parametrize("name", list(MODELS))
def test_outputs_equal_the_recorded_ones(name):
    assert mismatches(outputs(load(name)), np.load(REFERENCE / f"{name}.npz")) == []


@pytest.mark.slow
def test_a_weight_changed_by_1e_4_is_caught():
    """One entry of the first encoder layer's query projection, +1e-4: the comparison reports the values after it
    (that layer's queries, the output's log-probabilities) and none before it (the embeddings). The tiny Marian model
    is the quickest to run."""
    tr = load("marian")
    with torch.no_grad():
        tr.model.encoder[0].attn.w_q.weight[0, 0] += 1e-4  # (d, d) float64
    found = {m.split(":")[0] for m in mismatches(outputs(tr), np.load(REFERENCE / "marian.npz"))}
    assert {"trace/enc_self/0/q", "trace/log_probs"} <= found
    assert not {k for k in found if k.startswith("trace/src_embed")}
