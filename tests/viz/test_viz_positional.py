"""Tests for viz.positional: the sinusoid formula and its figures."""

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.positional import pe_heatmap, position_similarity_figure, sinusoidal_encoding, waves_figure


def test_position_zero_is_sin0_cos0():
    pe = sinusoidal_encoding(10, 8)
    assert pe.shape == (10, 8) and pe.dtype == np.float32
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1, 0, 1, 0, 1], atol=1e-7)


def test_hand_checked_values():
    pe = sinusoidal_encoding(50, 16)
    assert pe[1, 0] == pytest.approx(math.sin(1.0), abs=1e-6)
    assert pe[1, 1] == pytest.approx(math.cos(1.0), abs=1e-6)
    # dims 4, 5 use i = 2: angle = pos / 10000^(4/16) = pos / 10
    assert pe[7, 4] == pytest.approx(math.sin(0.7), abs=1e-6)
    assert pe[7, 5] == pytest.approx(math.cos(0.7), abs=1e-6)
    assert pe[30, 14] == pytest.approx(math.sin(30 / 10000 ** (14 / 16)), abs=1e-6)
    assert np.abs(pe).max() <= 1.0


def test_odd_d_model():
    pe = sinusoidal_encoding(4, 5)
    assert pe.shape == (4, 5)
    assert pe[2, 4] == pytest.approx(math.sin(2 / 10000 ** (4 / 5)), abs=1e-6)


def test_waves_figure_one_line_per_dim():
    pe = sinusoidal_encoding(40, 16)
    fig = waves_figure(pe, [0, 1, 6])
    assert [t.name for t in fig.data] == ["dim 0 (sin)", "dim 1 (cos)", "dim 6 (sin)"]
    np.testing.assert_allclose(np.asarray(fig.data[2].y), pe[:, 6])
    with pytest.raises(ValueError, match="outside"):
        waves_figure(pe, [16])


def test_pe_heatmap_range_and_orientation():
    pe = sinusoidal_encoding(20, 16)
    fig = pe_heatmap(pe)
    assert np.asarray(fig.data[0].z).shape == (20, 16)
    assert fig.data[0].zmin == -1 and fig.data[0].zmax == 1
    assert fig.layout.yaxis.autorange == "reversed"
    assert "position" in fig.layout.yaxis.title.text


def test_position_similarity_peaks_on_diagonal():
    pe = sinusoidal_encoding(30, 32)
    fig = position_similarity_figure(pe)
    sim = np.asarray(fig.data[0].z)
    assert sim.shape == (30, 30)
    np.testing.assert_allclose(np.diag(sim), 16.0, rtol=1e-5)  # sin² + cos² per pair
    assert (sim.argmax(axis=1) == np.arange(30)).all()
    fig2 = position_similarity_figure(pe, ref_position=10)
    line = next(t for t in fig2.data if isinstance(t, go.Scatter))
    x, y = np.asarray(line.x), np.asarray(line.y)
    assert x[np.argmax(y)] == 0 and x[0] == -10


def test_marian_layout_keeps_the_sines_first():
    pe = sinusoidal_encoding(12, 8, "sin_then_cos")
    paper = sinusoidal_encoding(12, 8)
    np.testing.assert_allclose(pe[:, :4], paper[:, 0::2], atol=1e-6)  # the same waves, rearranged
    np.testing.assert_allclose(pe[:, 4:], paper[:, 1::2], atol=1e-6)
    names = [t.name for t in waves_figure(pe, [0, 4], layout="sin_then_cos").data]
    assert names == ["dim 0 (sin)", "dim 4 (cos)"]
    with pytest.raises(ValueError):
        sinusoidal_encoding(4, 8, "diagonal")
