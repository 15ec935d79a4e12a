"""The notebook package (atlas/): the shipped model loads by default, and atlas.show draws the pages' figures from
what the model recorded."""
from __future__ import annotations

import numpy as np
import pytest

TEXT = "Ein Hund läuft im Schnee."


@pytest.fixture(scope="module")
def tr():
    import atlas

    return atlas.load(draft=False)


def _heatmaps(fig) -> list[np.ndarray]:
    return [np.asarray(t.z, dtype=float) for t in fig.data if t.type == "heatmap"]


def test_show_attention_draws_the_traced_weights_every_head_or_one(tr):
    import atlas

    trace = tr.trace(TEXT).trace
    every = _heatmaps(atlas.show.attention(tr, TEXT, kind="cross", layer=2))
    assert len(every) == tr.cfg.n_heads
    for h, z in enumerate(every):
        np.testing.assert_allclose(z, trace.probs("cross")[1, h], atol=1e-6)
    (one,) = _heatmaps(atlas.show.attention(tr, TEXT, kind="enc_self", layer=1, head=3))
    np.testing.assert_allclose(one, trace.probs("enc_self")[0, 2], atol=1e-6)
    with pytest.raises(ValueError, match="layer 9 is out of range: 1 to"):
        atlas.show.attention(tr, TEXT, layer=9)


def test_show_attention_draws_what_a_layer_carries(tr):
    import atlas

    fig = atlas.show.attention(tr, TEXT, kind="cross", layer=2, carry="alti")
    (z,) = _heatmaps(fig)
    assert np.allclose(np.nansum(z, axis=1), 1.0, atol=1e-4)  # ALTI+ shares, the own stream's column included
    assert str(fig.data[0].x[-1]).startswith("(own stream)")
    norms = _heatmaps(atlas.show.attention(tr, TEXT, kind="cross", layer=2, carry="norms"))
    assert len(norms) == tr.cfg.n_heads and all((z >= 0).all() for z in norms)


def test_show_alignment_links_the_words_as_model_align_does(tr):
    import atlas
    from model.analysis.align import encode_pair
    from model.analysis.links import links, matrix

    fig = atlas.show.alignment(tr, "Ein Hund läuft .", "A dog runs .", method="alti", layer=2)
    predicted = next(t for t in fig.data if t.name == "predicted")
    pair = encode_pair(tr, "Ein Hund läuft .".split(), "A dog runs .".split())
    want = links(pair, matrix(pair, "alti", 1, None))
    got = {(list(fig.data[0].x).index(x), list(fig.data[0].y).index(y)) for x, y in zip(predicted.x, predicted.y)}
    assert got == want


def test_show_draws_the_embedding_stages_a_decoding_step_and_the_source_share(tr):
    import atlas

    done = tr.trace(TEXT)
    stages = _heatmaps(atlas.show.embeddings(tr, TEXT))
    np.testing.assert_allclose(stages[0], done.trace.src_embed["token"], atol=5e-4)  # drawn to 3 decimals
    np.testing.assert_allclose(stages[-1], done.trace.src_embed["total"], atol=5e-4)
    candidates, looked = atlas.show.step(tr, TEXT, step=2, layer=1, head=2)
    labels, probs, _ = done.steps[1].candidates()
    np.testing.assert_allclose(np.asarray(candidates.data[0].x, dtype=float), probs, rtol=1e-6)  # best first
    np.testing.assert_allclose(np.asarray(looked.data[0].y, dtype=float), done.steps[1].cross[0, 1], atol=1e-6)
    share = atlas.show.source_share(tr, TEXT, step=1)
    bars = np.asarray(share.data[0].y, dtype=float)
    assert len(bars) == len(done.steps) and ((0 <= bars) & (bars <= 1)).all()


def test_show_draws_the_logit_lens_and_the_positional_waves(tr):
    import atlas
    from model.analysis.lens import logit_lens
    from viz.positional import sinusoidal_encoding

    tokens = [s.chosen_token for s in tr.trace(TEXT).steps]
    fig = atlas.show.lens(tr, TEXT, step=2)
    want = logit_lens(tr, TEXT, tokens, 1, 5)
    bars = next(t for t in fig.data if t.type == "bar")
    np.testing.assert_allclose(np.asarray(bars.x, dtype=float), want.chosen_probs, rtol=1e-5)
    waves = atlas.show.positional(tr, positions=20, dims=(0, 1))
    pe = sinusoidal_encoding(20, tr.cfg.d_model, tr.cfg.pe_layout, tr.cfg.pos_offset)
    np.testing.assert_allclose(np.asarray(waves.data[0].y, dtype=float), pe[:, 0], atol=1e-6)


def test_show_head_draws_each_step_of_one_head_as_recorded(tr):
    import atlas

    rows = atlas.show.head(tr, TEXT, kind="enc_self", layer=2, head=4)
    a = tr.trace(TEXT).trace.attn["enc_self"][1]
    figures = list(rows.values())
    assert list(rows) == [("Q", "K", "V"), ("scores", "scaled"), ("softmax", "dropout"), ("output",)]  # no mask
    drawn = [np.asarray(t.z, dtype=float) for f in figures for t in f.data if t.type == "heatmap"]
    assert any(z.shape == a["probs"][3].shape and np.allclose(z, a["probs"][3], atol=5e-4) for z in drawn)
