"""Tests for the figures of the other model families: fairseq's sinusoidal table and its row offset, T5's relative
position bias read by distance, the embedding stages a model has, and a head whose scores get a bias and no
scaling."""
import math

import numpy as np
import pytest

from viz.embeddings import embedding_stages
from viz.head import head_pipeline_figures
from viz.positional import cosine_rows, position_similarity_figure, sinusoidal_encoding, waves_figure
from viz.relative import bias_by_distance, bias_distance_figure


def test_fairseq_layout_reads_its_rows_from_the_offset():
    d, half = 8, 4
    pe = sinusoidal_encoding(5, d, "fairseq", offset=2)
    for p in range(5):
        for i in range(half):
            angle = (p + 2) * math.exp(-i * math.log(10000.0) / (half - 1))
            assert pe[p, i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[p, half + i] == pytest.approx(math.cos(angle), abs=1e-6)
    np.testing.assert_array_equal(pe, sinusoidal_encoding(7, d, "fairseq")[2:])
    np.testing.assert_array_equal(sinusoidal_encoding(3, 5, "fairseq")[:, 4], 0)  # odd d: a zero column last
    assert [t.name for t in waves_figure(pe, [3, 4], "fairseq").data] == ["dim 3 (sin)", "dim 4 (cos)"]


def t5_like_bias(n_q: int, n_k: int, heads: int = 3, seed: int = 0) -> np.ndarray:
    """(h, i, j) a bias that depends on j − i only, as T5's buckets make it."""
    table = np.random.default_rng(seed).normal(size=(heads, n_q + n_k)).astype(np.float32)
    dist = np.arange(n_k)[None, :] - np.arange(n_q)[:, None]  # (i, j)
    return table[:, dist + n_q]


def test_bias_by_distance_takes_each_diagonal_of_the_recorded_matrix():
    bias = t5_like_bias(4, 6)
    distances, values, spread = bias_by_distance(bias)
    assert distances.tolist() == list(range(-3, 6)) and values.shape == (3, 9) and spread == 0.0
    for n, k in enumerate(distances):
        diag = np.diagonal(bias, offset=k, axis1=1, axis2=2)  # (h, cells at distance k)
        np.testing.assert_array_equal(diag, np.repeat(values[:, n:n + 1], diag.shape[1], axis=1))
    causal, _, _ = bias_by_distance(t5_like_bias(5, 5), causal=True)
    assert causal.tolist() == [-4, -3, -2, -1, 0]
    broken = bias.copy()
    broken[1, 2, 3] += 0.5  # one cell off its diagonal's value: the spread says so
    assert bias_by_distance(broken)[2] == pytest.approx(0.5)


def test_bias_distance_figure_draws_the_values_per_head_and_stack():
    enc, dec = bias_by_distance(t5_like_bias(4, 4)), bias_by_distance(t5_like_bias(3, 3, seed=1), causal=True)
    fig = bias_distance_figure(enc[:2], dec[:2])
    assert len(fig.data) == 6
    np.testing.assert_array_equal(np.asarray(fig.data[1].y), enc[1][1])
    np.testing.assert_array_equal(np.asarray(fig.data[4].x), dec[0])
    assert fig.data[4].xaxis == "x2" and fig.data[0].xaxis == "x"


def test_cosine_similarity_of_learned_vectors():
    v = np.random.default_rng(2).normal(size=(6, 5)).astype(np.float32) * np.arange(1, 7)[:, None]
    unit = cosine_rows(v)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1, rtol=1e-6)
    sim = np.asarray(position_similarity_figure(v, 2, cosine=True).data[0].z)
    np.testing.assert_allclose(np.diag(sim), 1, rtol=1e-5)  # the lengths (1..6) no longer count
    assert "cos" in position_similarity_figure(v, 2, cosine=True).layout.title.text


@pytest.mark.parametrize("keys, scaled, positions, titles", [
    (("token", "scaled", "positional", "total"), True, "sinusoidal",
     ("token embedding", "× √d_model", "+ positional encoding", "= input to layer 1")),
    (("token", "scaled", "total"), False, "relative", ("token embedding", "= input to layer 1")),
    (("token", "scaled", "positional", "sum", "total"), True, "learned",
     ("token embedding", "× √d_model", "+ learned position vector", "= sum", "LayerNorm = input to layer 1")),
])
def test_embedding_stages_are_the_ones_the_model_has(keys, scaled, positions, titles):
    emb = {k: np.full((2, 3), i, np.float32) for i, k in enumerate(keys)}
    got, arrays = embedding_stages(emb, scaled, positions)
    assert got == titles
    shown = [k for k in keys if scaled or k != "scaled"]
    assert len(arrays) == len(shown) and all(a is emb[k] for a, k in zip(arrays, shown))


def test_a_head_with_a_bias_and_no_scaling_draws_what_was_recorded():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(4, 8)).astype(np.float32) for _ in range(3))
    bias = t5_like_bias(4, 4, heads=1)[0]
    recorded = q @ k.T + bias  # T5: no 1/√d_k
    probs = np.exp(recorded) / np.exp(recorded).sum(-1, keepdims=True)
    toks = ["a", "b", "c", "d"]
    figs = head_pipeline_figures(q, k, v, None, None, probs, probs @ v, toks, toks, "enc_self",
                                 scaled_scores=recorded, pos_bias=bias, scaled=False)
    assert list(figs) == ["Q", "K", "V", "scores", "bias", "summed", "softmax", "output"]
    np.testing.assert_allclose(np.asarray(figs["scores"].data[0].z), q @ k.T, atol=1e-5)
    np.testing.assert_allclose(np.asarray(figs["bias"].data[0].z), bias)
    np.testing.assert_allclose(np.asarray(figs["summed"].data[0].z), recorded)
    assert "√" not in " ".join(f.layout.title.text or "" for f in figs.values())
    mask = np.tril(np.ones((4, 4), bool))
    masked = head_pipeline_figures(q, k, v, None, mask, probs, probs @ v, toks, toks, "dec_self",
                                   scaled_scores=recorded, pos_bias=bias, scaled=False)
    assert "summed" not in masked and "+ B, masked" in masked["masked"].layout.title.text.replace("<br>", " ")


def test_a_huge_vocabularys_map_is_fitted_on_a_sample_and_every_row_projected():
    """NLLB's 256,206-row table: the axes from PCA_FIT_ROWS evenly spaced rows agree with the whole table's where its
    components are well apart, and every row gets its point."""
    from viz.embeddings import PCA_FIT_ROWS, pca_2d

    rng = np.random.default_rng(0)
    scale = np.concatenate([[5.0, 3.0], np.full(30, 1.0)])
    m = (rng.standard_normal((PCA_FIT_ROWS + 40_000, 32)) * scale).astype(np.float32)
    got = pca_2d(m)
    whole = m.astype(np.float64) - m.mean(0)
    _, v = np.linalg.eigh(whole.T @ whole)
    comps = v[:, ::-1][:, :2].T
    comps = comps * np.sign(comps[np.arange(2), np.abs(comps).argmax(axis=1)])[:, None]
    assert got.shape == (len(m), 2)
    assert np.abs(got - whole @ comps.T).max() < 0.02 * np.abs(got).max()


@pytest.mark.parametrize("rows", [300, 60_040])  # fitted on the whole table, and on a sample of a huge one
def test_pca_leaves_the_excluded_rows_out_as_if_they_were_never_there(rows):
    """The specials (a zero <pad>, an outlier </s>) left out by `exclude` give the map of the other rows: the same
    points a copy of the table without them gives, and the table itself is never written."""
    from viz.embeddings import pca_2d

    rng = np.random.default_rng(1)
    m = (rng.standard_normal((rows, 24)) * np.linspace(5, 1, 24)).astype(np.float32)
    m[0], m[7] = 0.0, 400.0
    m.flags.writeable = False  # as the model's table arrives: a read-only view
    excluded = (0, 7, 7)
    got = pca_2d(m, exclude=excluded)
    expected = pca_2d(np.delete(m, [0, 7], axis=0))
    assert got.shape == (rows - 2, 2)
    assert np.abs(got - expected).max() < 1e-3 * np.abs(expected).max()
    with pytest.raises(ValueError, match="at least 2 rows"):
        pca_2d(m[:3], exclude=(0, 1))


def test_a_soft_capped_head_shows_the_cap_between_the_scaled_and_the_masked_scores():
    """T5Gemma: scores ÷ √query_pre_attn_scalar, then cap·tanh(s / cap), which the mask and the softmax read."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(4, 8)).astype(np.float32) * 2 for _ in range(3))
    scaled = q @ k.T / np.sqrt(16.0)  # query_pre_attn_scalar 16, not d_k 8
    capped = 2.0 * np.tanh(scaled / 2.0)
    mask = np.tril(np.ones((4, 4), dtype=bool))
    probs = np.exp(np.where(mask, capped, -np.inf))
    probs /= probs.sum(-1, keepdims=True)
    toks = ["a", "b", "c", "d"]
    figs = head_pipeline_figures(q, k, v, None, mask, probs, probs @ v, toks, toks, "dec_self", scaled_scores=scaled,
                                 scale=4.0, capped=capped, cap=2.0, rotated=True)
    assert list(figs)[3:7] == ["scores", "scaled", "capped", "masked"]
    np.testing.assert_allclose(figs["scores"].data[0].z, q @ k.T, rtol=1e-4, atol=1e-4)  # × 4, not × √8
    assert np.nanmax(np.abs(figs["capped"].data[0].z)) <= 2.0 < np.nanmax(np.abs(figs["scaled"].data[0].z))
    assert "√16" in figs["scaled"].layout.title.text and "rotated" in figs["Q"].layout.title.text
