"""Tests for viz.masks, viz.decoding and viz.architecture."""

import numpy as np
import pytest

from hover_support import cell_hover
from viz.architecture import architecture_figure, parameter_table
from viz.decoding import candidates_figure, decoding_table, step_cross_attention_figure
from viz.masks import mask_figure
from viz.token_axes import MAX_HEIGHT, MIN_HEIGHT, MIN_TICK_FONT, MIN_TICK_PX, ROW_PX, heatmap_height, plot_rows_px

EN = ["<s>", "the", "dog", "sees", "the", "cat"]


def causal_mask(n: int) -> np.ndarray:
    """A test input: pages draw the masks the model recorded, so viz/ builds none."""
    return np.tril(np.ones((n, n), dtype=bool))


def test_viz_builds_no_masks_from_tokens():
    import viz.masks

    assert not hasattr(viz.masks, "padding_mask") and not hasattr(viz.masks, "padding_demo_figure")


def test_mask_figure_two_colours_and_labels():
    m = causal_mask(6)
    fig = mask_figure(m, EN, EN, kind="dec_self")
    z = np.asarray(fig.data[0].z)
    np.testing.assert_array_equal(z, m.astype(np.float32))
    assert fig.data[0].showscale is False  # two colours: the note says which is masked, the hover each cell's state
    cs = fig.data[0].colorscale
    assert cs[0][1] == cs[1][1] != cs[-1][1]
    assert list(fig.layout.xaxis.ticktext) == ["&lt;s&gt;", "the", "dog", "sees", "the", "cat"]
    assert "EN" in fig.layout.yaxis.title.text and "query" in fig.layout.yaxis.title.text
    assert cell_hover(fig.data[0], 0, 1) == "query: &lt;s&gt; (0)<br>key: the (1)<br>masked"
    assert cell_hover(fig.data[0], 4, 1) == "query: the (4)<br>key: the (1)<br>may attend"  # the two "the" apart
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "category"
    assert fig.layout.annotations[0].text == "grey × = masked: 15 of 36 cells"
    crosses = fig.data[1]  # an "x" on each masked cell: grey is not the only sign
    assert crosses.mode == "markers" and len(crosses.x) == 15
    assert (crosses.x[0], crosses.y[0]) == ("the (1)", "&lt;s&gt; (0)")  # key, query


def test_narrow_figures_wrap_their_titles_to_fit():
    """Plotly clips a title at the figure's edge: a figure built for a column wraps its title to that width."""
    from viz.head import THIRD_WIDTH_PX, head_pipeline_figures
    from viz.layout import text_px
    from viz.text import TITLE_WRAP_CHARS
    from viz.theme import theme

    title = "mask the model used (blue = may attend), with a long tail"
    for width in (300, 500, None):
        fig = mask_figure(causal_mask(6), EN, EN, title=title, kind="dec_self", width_px=width)
        lines = fig.layout.title.text.split("<br>")
        assert "".join(lines).replace(" ", "") == title.replace(" ", "")
        if width:
            assert all(text_px(line, theme().title) <= width * 0.8 for line in lines)
            assert (len(lines) > 1) == (text_px(title, theme().title) > width * 0.8)
        else:  # no width given: the usual wrap at TITLE_WRAP_CHARS characters
            assert max(len(line) for line in lines) <= TITLE_WRAP_CHARS < len(title)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((6, 8)).astype(np.float32)
    figs = head_pipeline_figures(q, q, q, None, None, np.full((6, 6), 1 / 6, np.float32), q, EN, EN, "dec_self")
    for name in ("Q", "K", "V", "scores", "scaled"):
        for line in figs[name].layout.title.text.split("<br>"):
            assert text_px(line, theme().title) <= THIRD_WIDTH_PX * 0.8, (name, line)


@pytest.mark.parametrize("n", [13, 120])
def test_mask_figure_grows_with_rows_and_thins_labels(n):
    toks = [f"tok{i}" for i in range(n)]
    fig = mask_figure(causal_mask(n), toks, toks, title="causal mask", kind="dec_self")
    height = fig.layout.height
    assert height == heatmap_height(n, toks, 1) and MIN_HEIGHT <= height <= MAX_HEIGHT
    rows_px = plot_rows_px(height, toks, 1)
    step = fig.layout.yaxis.tickvals[1] - fig.layout.yaxis.tickvals[0]
    if n == 13:
        assert rows_px == 13 * ROW_PX and step == 1
        assert list(fig.layout.xaxis.ticktext) == toks
    else:
        assert height == MAX_HEIGHT and step >= 2
        assert list(fig.layout.xaxis.tickvals)[1] >= 2
    assert list(fig.layout.yaxis.tickvals) == list(range(0, n, step))
    assert rows_px / n * step >= MIN_TICK_PX
    assert min(fig.layout.xaxis.tickfont.size, fig.layout.yaxis.tickfont.size) >= MIN_TICK_FONT
    trace = fig.data[0]  # hover names every token, though only some are labelled
    assert list(trace.y) == list(trace.x) == [f"tok{i} ({i})" for i in range(n)]
    assert cell_hover(trace, n - 1, 0) == f"query: tok{n - 1} ({n - 1})<br>key: tok0 (0)<br>may attend"


def test_candidates_figure():
    fig = candidates_figure(["cat", "dog", "<unk>"], [0.7, 0.2, 0.05], chosen_index=1)
    bar = fig.data[0]
    assert list(bar.text) == ["0.700", "0.200", "0.050"]
    assert np.asarray(bar.customdata)[2].tolist() == ["&lt;unk&gt;", "0.050"]
    assert "%{customdata[1]}" in bar.hovertemplate
    tiny = candidates_figure(["a", "b"], [0.9996, 0.0004]).data[0]
    assert list(tiny.text) == ["1.000", "<0.001"]
    assert bar.marker.color[1] != bar.marker.color[0] == bar.marker.color[2]
    assert fig.layout.xaxis.range[0] == 0 and fig.layout.xaxis.range[1] >= 1
    assert list(fig.layout.yaxis.ticktext) == ["cat", "dog", "&lt;unk&gt;"]
    with pytest.raises(ValueError, match="chosen_index"):
        candidates_figure(["a"], [1.0], chosen_index=2)


def test_step_cross_attention_uses_integer_positions():
    src = ["die", "Katze", "sieht", "die", "Katze", "."]
    w = np.array([0.05, 0.6, 0.05, 0.05, 0.2, 0.05])
    fig = step_cross_attention_figure(w, src)
    assert list(fig.data[0].x) == list(range(6))
    assert list(fig.layout.xaxis.tickvals) == list(range(6))
    assert list(fig.layout.xaxis.ticktext) == src
    assert fig.layout.yaxis.range[0] == 0 and fig.layout.yaxis.range[1] >= 1
    colours = fig.data[0].marker.color
    assert colours[1] != colours[4] == colours[0]
    assert list(fig.data[0].text) == ["0.050", "0.600", "0.050", "0.050", "0.200", "0.050"]
    assert np.asarray(fig.data[0].customdata)[1].tolist() == ["Katze (1)", "0.600"]
    assert "DE" in fig.layout.xaxis.title.text
    with pytest.raises(ValueError, match="source tokens"):
        step_cross_attention_figure(w[:3], src)


def test_step_cross_attention_labels_only_what_fits():
    src = [f"w{i}" for i in range(30)]
    w = np.full(30, 0.01, dtype=np.float32)
    w[7] = 0.71
    bar = step_cross_attention_figure(w, src, width_px=600).data[0]
    assert [t for t in bar.text if t] == ["0.710"] and bar.text[7] == "0.710"
    assert bar.constraintext == "none" and bar.textfont.size >= 11  # never shrunk below 11 px
    assert np.asarray(bar.customdata)[3].tolist() == ["w3 (3)", "0.010"]  # hover has every one
    assert not all(bar.text)
    assert all(step_cross_attention_figure(w[:8] / w[:8].sum(), src[:8], width_px=600).data[0].text)


def test_decoding_table():
    steps = [{"step": 1, "prefix": ["<s>"], "chosen": "the", "prob": 0.91},
             {"step": 2, "prefix": "<s> the", "chosen": "dog", "prob": np.float32(0.5)}]
    df = decoding_table(steps)
    assert list(df.columns) == ["step", "prefix", "chosen", "prob"]
    assert df["prefix"].tolist() == ["<s>", "<s> the"]
    assert df["prob"].tolist() == ["0.910", "0.500"]
    assert decoding_table([{"step": 1, "prefix": "", "chosen": "a", "prob": 2e-4}]).loc[0, "prob"] \
        == "<0.001"
    with pytest.raises(ValueError, match="missing"):
        decoding_table([{"step": 1}])


def test_parameter_table_shares():
    rows = parameter_table({"embeddings": 300, "encoder": 500, "decoder": 200})
    assert all(list(r) == ["component", "parameters", "share"] for r in rows)
    assert [r["component"] for r in rows] == ["embeddings", "encoder", "decoder", "total"]
    assert [r["parameters"] for r in rows] == ["300", "500", "200", "1,000"]
    assert [r["share"] for r in rows] == ["30.0 %", "50.0 %", "20.0 %", "100 %"]


def test_parameter_table_separators_and_small_shares():
    counts = {"encoder layers": 3_159_552, "decoder layers": 4_213_248, "final LayerNorm": 512,
              "empty": 0}
    rows = parameter_table(counts)
    assert [r["parameters"] for r in rows] == ["3,159,552", "4,213,248", "512", "0", "7,373,312"]
    share = {r["component"]: r["share"] for r in rows}
    assert share["final LayerNorm"] == "0.0069 %" and share["empty"] == "0 %"
    for name, n in counts.items():  # a non-zero count never reads as zero
        assert (float(share[name].rstrip(" %")) > 0) == (n > 0)
    with pytest.raises(ValueError, match="empty"):
        parameter_table({})


def test_architecture_figure_mentions_layers():
    fig = architecture_figure(3, 2, 256, 8)
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "encoder layer × 3" in texts and "decoder layer × 2" in texts
    assert "256" in fig.layout.title.text
    assert len(fig.layout.shapes) == 5


def test_architecture_figure_scales_both_embeddings_and_names_languages():
    fig = architecture_figure(3, 3, 256, 4)
    embeddings = [a.text for a in fig.layout.annotations if "embedding" in a.text]
    assert len(embeddings) == 2 and all("√d_model" in t for t in embeddings)
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "German" in texts and "English" in texts
    fig = architecture_figure(3, 3, 256, 4, src_lang="French", tgt_lang="<i>Italian</i>")
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "French tokens" in texts and "&lt;i&gt;Italian&lt;/i&gt; tokens" in texts
    assert "German" not in texts and "English" not in texts and " DE " not in texts


def test_viz_imports_neither_torch_nor_streamlit():
    import subprocess
    import sys
    code = ("import sys, viz.text, viz.theme, viz.kinds, viz.scales, viz.layout, viz.token_axes, viz.heatmap, "
            "viz.transport, viz.attention, viz.embeddings, viz.positional, viz.head, viz.masks, viz.decoding, "
            "viz.architecture, viz.compare, viz.heads, viz.training, viz.tables; "
            "print(sorted({'torch', 'streamlit'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
