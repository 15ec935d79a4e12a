"""Tests for viz.embeddings: heatmaps, scaling, stages, PCA, vocabulary map, neighbours."""

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.embeddings import (
    embedding_heatmap,
    embedding_stages_figure,
    nearest_neighbours,
    pca_2d,
    scaling_figure,
    vocab_map_figure,
)

TOKENS = ["der", "Hund", "<b>", "der", "."]


def test_embedding_heatmap_tokens_by_dimensions():
    m = np.random.default_rng(0).normal(size=(5, 16))
    fig = embedding_heatmap(m, TOKENS)
    z = np.asarray(fig.data[0].z)
    # sent as the hover shows it: three decimals (".3f"), short in the JSON
    np.testing.assert_array_equal(z, np.round(m.astype(np.float32).astype(np.float64), 3))
    assert fig.data[0].hovertemplate.endswith("%{z:.3f}<extra></extra>")
    assert list(fig.layout.yaxis.ticktext) == ["der", "Hund", "&lt;b&gt;", "der", "."]
    assert list(fig.layout.yaxis.tickvals) == list(range(5))
    assert fig.data[0].zmin == -fig.data[0].zmax
    assert "dimension" in fig.layout.xaxis.title.text


def test_scaling_figure_std_grows_by_sqrt_d():
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(5, 64)).astype(np.float32) * 0.1
    fig = scaling_figure(emb, emb * 8.0, 64, TOKENS)
    boxes = [t for t in fig.data if isinstance(t, go.Box)]
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert len(boxes) == 2 and len(bars) == 2
    np.testing.assert_allclose(np.asarray(bars[1].y), np.asarray(bars[0].y) * 8.0, rtol=1e-5)
    assert "8.0" in fig.layout.title.text
    with pytest.raises(ValueError, match="same"):
        scaling_figure(emb, emb[:, :10], 64)


def test_stages_figure_four_panels_shared_scale():
    rng = np.random.default_rng(2)
    stages = [rng.normal(size=(5, 32)) * s for s in (0.1, 1.0, 1.0, 1.5)]
    fig = embedding_stages_figure(*stages, TOKENS)
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heat) == 4
    assert all(t.coloraxis == "coloraxis" for t in heat)
    cmin, cmax = fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax
    assert cmin == -cmax and cmax > 0
    assert [a.text for a in fig.layout.annotations][:4] == [
        "token embedding", "× √d_model", "+ positional encoding", "= input to layer 1"]


def test_pca_shape_and_variance_order():
    rng = np.random.default_rng(3)
    # Strong spread along one direction, weaker along a second, noise elsewhere.
    base = rng.normal(size=(200, 3)) * np.array([10.0, 3.0, 0.5])
    rot, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    m = np.pad(base, ((0, 0), (0, 5))) @ rot + 5.0
    coords = pca_2d(m)
    assert coords.shape == (200, 2) and coords.dtype == np.float32
    var = coords.var(axis=0)
    assert var[0] > var[1] > 0
    assert var[0] == pytest.approx(100, rel=0.3)
    np.testing.assert_allclose(coords.mean(axis=0), 0, atol=1e-3)


def test_pca_matches_the_svd_projection():
    m = np.random.default_rng(5).normal(size=(300, 16)) * np.linspace(4, 0.5, 16) + 2.0
    centred = m - m.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    expected = centred @ vt[:2].T  # (300, 2), up to each component's sign
    coords = pca_2d(m)
    for c in range(2):
        np.testing.assert_allclose(np.abs(coords[:, c]), np.abs(expected[:, c]), rtol=1e-4, atol=1e-4)
    # the sign rule: each component's largest loading is positive, so the map never flips between runs
    loadings = np.linalg.lstsq(centred, coords.astype(np.float64), rcond=None)[0]  # (16, 2)
    assert all(loadings[np.abs(loadings[:, c]).argmax(), c] > 0 for c in range(2))


def test_vocab_map_highlights_sentence_tokens():
    coords = np.random.default_rng(4).normal(size=(50, 2))
    vocab = [f"w{i}" for i in range(50)]
    fig = vocab_map_figure(coords, vocab, [3, 7], ["Hund", "<i>"], n_dots=20)
    density, dots, hl = fig.data
    # every entry counted
    assert isinstance(density, go.Heatmap) and np.nansum(np.asarray(density.z, dtype=float)) == 50
    assert len(dots.x) == 20 and list(dots.text) == vocab[:20]  # the first entries named on hover
    assert list(hl.text) == ["Hund", "&lt;i&gt;"]
    np.testing.assert_allclose(np.asarray(hl.x), coords[[3, 7], 0], rtol=1e-6)
    with pytest.raises(ValueError, match="V, 2"):
        vocab_map_figure(coords[:10], vocab, [])


def test_vocab_map_density_puts_each_entry_in_its_cell():
    coords = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 5.0]])
    fig = vocab_map_figure(coords, ["a", "b", "c"], bins=(2, 2))
    z = np.asarray(fig.data[0].z, dtype=float)  # (y bins, x bins)
    assert z[0, 0] == 2 and z[1, 1] == 1 and np.isnan(z[0, 1]) and np.isnan(z[1, 0])
    assert fig.data[0].x[0] < fig.data[0].x[1] and fig.data[0].y[0] < fig.data[0].y[1]


def test_nearest_neighbours_on_constructed_matrix():
    vocab = ["king", "queen", "apple", "pear", "car"]
    m = np.array([[1.0, 0.0, 0.0],
                  [0.9, 0.1, 0.0],
                  [0.0, 1.0, 0.0],
                  [0.0, 0.95, 0.2],
                  [0.5, 0.0, 0.8660254]])
    df = nearest_neighbours(m * 3.0, vocab, [0, 2], k=2)
    assert list(df.columns) == ["token", "neighbour 1", "neighbour 2"]
    assert list(df["token"]) == ["king", "apple"]
    assert df.loc[0, "neighbour 1"].startswith("queen (0.99")
    assert df.loc[1, "neighbour 1"].startswith("pear (")
    assert not any(df.loc[0, c].startswith("king") for c in ["neighbour 1", "neighbour 2"])
    excl = nearest_neighbours(m, vocab, [0], k=1, exclude_idx=[1])
    assert excl.loc[0, "neighbour 1"] == "car (0.50)"


def test_the_values_sent_as_shown_hover_the_same_text_in_less_json():
    from viz.heatmap import as_shown_values, heatmap
    from viz.transport import browser_json

    m = np.random.default_rng(3).normal(size=(9, 256)).astype(np.float32) * 3
    shown = as_shown_values(m, ".3f")
    assert [f"{v:.3f}" for v in shown.ravel()] == [f"{v:.3f}" for v in m.astype(np.float64).ravel()]
    assert as_shown_values(m, ".2%") is m  # a format that is not fixed decimals: every digit
    full, short = (len(browser_json(heatmap(m, None, None, row_title="r", col_title="c", fmt=".3f", as_shown=a), "a"))
                   for a in (False, True))
    assert short < 0.7 * full, (short, full)
