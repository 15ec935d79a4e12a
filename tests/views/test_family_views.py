"""AppTest of the Positional encoding, Embeddings and Inside-one-head pages with imported models of the other
families (built and imported inside the test): T5 (relative position bias, no scaling of the scores), mBART
(learned positions, an embedding norm) and M2M100 (fairseq's sinusoidal table read from row 2). Each page must draw
what the model recorded for the sentence, and only the steps the model has."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.app_support import array, run_app, serving, visible_text

FAMILIES = ("t5", "mbart", "m2m100")
VIEWS = ("Positional encoding", "Embeddings", "Inside one head")
TEXT = "Der Hund läuft im Park."


@pytest.fixture(scope="module")
def family_root(tmp_path_factory):
    """A checkpoint root holding one tiny imported model per family, named after it, served to the app."""
    import torch

    from model.io.import_hf import import_hf
    from tests.hf_support import build, import_args

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        base = tmp_path_factory.mktemp("family_views")
        for family in FAMILIES:
            import_hf(str(build(family, base / "hf" / family)), base / "root" / family, **import_args(family))
    finally:
        torch.set_num_threads(threads)
    with serving(base / "root", "t5"):
        yield base / "root"


@pytest.fixture(scope="module")
def traces(family_root):
    """family -> the SentenceTrace of TEXT, as the Translator records it (the app shows the same sentence)."""
    from model.inference.translator import Translator

    return {f: Translator.from_checkpoint(family_root / f).trace(TEXT).trace for f in FAMILIES}


def _specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _title(spec: dict) -> str:
    return (spec["layout"].get("title") or {}).get("text", "")


def _notes(spec: dict) -> list[str]:
    return [a.get("text", "") for a in spec["layout"].get("annotations", [])]


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("family", FAMILIES)
def test_the_page_draws_every_family(family_root, family, view):
    at = run_app(view=view, text=TEXT, ckpt=family)
    assert not at.exception, at.exception
    assert at.error.len == 0, [e.value for e in at.error]
    assert at.get("plotly_chart"), "no figure drawn"


def test_t5_bias_by_distance_is_read_from_the_recorded_diagonals(family_root, traces):
    st = traces["t5"]
    at = run_app(view="Positional encoding", text=TEXT, ckpt="t5")
    assert not at.exception
    fig = next(s for s in _specs(at) if _title(s).startswith("Position bias each head adds"))
    lines = [t for t in fig["data"] if t["type"] == "scatter"]
    assert len(lines) == 2 * st.src_pos_bias.shape[0]  # one line per head, encoder and decoder
    for trace in lines:
        bias = st.src_pos_bias if trace.get("xaxis", "x") == "x" else st.tgt_pos_bias
        head = int(trace["name"].split()[-1]) - 1
        xs, ys = array(trace["x"]).astype(int), array(trace["y"])
        n_q, n_k = bias.shape[1:]
        assert xs.min() == -(n_q - 1) and xs.max() == (n_k - 1 if bias is st.src_pos_bias else 0)
        for k, y in zip(xs, ys):
            np.testing.assert_allclose(np.diagonal(bias[head], offset=k), y, rtol=1e-6, atol=1e-6)
    assert "no position vector" in visible_text(at)
    assert not any(w.key == "pe_positions" for w in at.slider)  # no table: no positions to choose


def test_t5_bias_matrix_of_a_chosen_head_is_the_recorded_one(family_root, traces):
    st = traces["t5"]
    at = run_app(view="Positional encoding", text=TEXT, ckpt="t5", emb_side="tgt", head=3)
    assert not at.exception
    fig = next(s for s in _specs(at) if "decoder head 3" in _title(s))
    value = next(t for t in fig["data"] if t["type"] == "heatmap" and t.get("name") != "masked")
    z = array(value["z"]).reshape(st.tgt_pos_bias.shape[1:])
    upper = np.triu(np.ones_like(z, dtype=bool), 1)  # keys after the query: masked, drawn grey
    np.testing.assert_allclose(z[~upper], st.tgt_pos_bias[2][~upper], atol=1e-6)
    assert np.isnan(z[upper]).all()


def test_mbart_positional_page_draws_the_learned_vectors_it_added(family_root, traces):
    st = traces["mbart"]
    at = run_app(view="Positional encoding", text=TEXT, ckpt="mbart")
    assert not at.exception
    said = visible_text(at)
    assert "learned its position vectors" in said and "reads row p + 2" in said
    matrix = next(s for s in _specs(at) if "Learned position vectors" in _title(s))
    z = array(matrix["data"][0]["z"]).reshape(st.src_embed["positional"].shape)
    np.testing.assert_allclose(z, st.src_embed["positional"], atol=5e-4)  # the heatmap's values, to its 3 decimals
    sim = next(s for s in _specs(at) if "cos(P_i, P_j)" in _title(s))
    unit = st.src_embed["positional"] / np.linalg.norm(st.src_embed["positional"], axis=1, keepdims=True)
    np.testing.assert_allclose(array(sim["data"][0]["z"]).reshape(len(unit), len(unit)), unit @ unit.T, atol=1e-5)
    assert not any(w.key == "pe_positions" for w in at.slider) and not at.multiselect


def test_m2m100_formula_matches_what_the_model_added_from_row_two(family_root):
    at = run_app(view="Positional encoding", text=TEXT, ckpt="m2m100")
    assert not at.exception
    note = next(c.value for c in at.caption if "the formula matches" in c.value)
    assert float(re.search(r"to ([0-9.e+-]+)\.$", note).group(1)) < 1e-4
    said = visible_text(at)
    assert "reads row p + 2" in said and "10000^(i/(d/2 − 1))" in said


@pytest.mark.parametrize("family, stages", [
    ("t5", ["token embedding", "= input to layer 1"]),
    ("mbart", ["token embedding", "× √d_model", "+ learned position vector", "= sum", "LayerNorm = input to layer 1"]),
    ("m2m100", ["token embedding", "× √d_model", "+ positional encoding", "= input to layer 1"]),
])
def test_embeddings_show_the_stages_the_model_has(family_root, traces, family, stages):
    at = run_app(view="Embeddings", text=TEXT, ckpt=family)
    assert not at.exception
    fig = next(s for s in _specs(at) if _title(s) == "From token to layer input")
    assert [n for n in _notes(fig) if n in stages] == stages
    heat = [t for t in fig["data"] if t["type"] == "heatmap"]
    emb = traces[family].src_embed
    np.testing.assert_allclose(array(heat[-1]["z"]).reshape(emb["total"].shape), emb["total"], atol=5e-4)
    titles = " ".join(_title(s) for s in _specs(at))
    assert ("Scaling by √d_model" in titles) == (family != "t5")


def test_t5_head_shows_the_bias_and_no_scaling(family_root, traces):
    st = traces["t5"]
    for kind, biased in (("enc_self", True), ("dec_self", True), ("cross", False)):
        at = run_app(view="Inside one head", text=TEXT, ckpt="t5", kind=kind, layer=2, head=2)
        assert not at.exception
        said = visible_text(at)
        titles = json.dumps([_title(s) for s in _specs(at)] + [n for s in _specs(at) for n in _notes(s)],
                            ensure_ascii=False)
        assert "Scaled by 1/√d_k" not in said and "/ √" not in titles and "√d_k = " not in said
        assert "does not divide its scores by √d_k" in said
        assert ("Position bias B" in said) == biased and ("position bias B" in titles) == biased
        check = re.search(r"match the model's recorded ones to ([0-9.e+-]+);", said)
        assert check and float(check.group(1)) < 1e-4
    # the bias panel draws the recorded bias of the head
    at = run_app(view="Inside one head", text=TEXT, ckpt="t5", kind="enc_self", layer=1, head=2)
    row = next(s for s in _specs(at) if any("position bias B" in n for n in _notes(s)))
    heat = [t for t in row["data"] if t["type"] == "heatmap" and t.get("name") != "masked"]
    n = len(st.src_tokens)
    assert any(np.allclose(array(t["z"]).reshape(n, n), st.src_pos_bias[1], atol=1e-6) for t in heat)


def test_the_head_page_of_a_scaled_model_keeps_its_scaling_step(family_root):
    at = run_app(view="Inside one head", text=TEXT, ckpt="m2m100", kind="enc_self")
    assert not at.exception
    said = visible_text(at)
    assert "Scaled by 1/√d_k" in said and "Position bias B" not in said


def test_the_lesson_file_draws_a_t5_trace(family_root, traces):
    from model.inference.translator import Translator
    from model.io.lesson import lesson_data
    from viz.lesson import lesson_pack

    tr = Translator.from_checkpoint(family_root / "t5")
    pack, metas = lesson_pack(lesson_data(tr, [(tr.trace(TEXT), None)], "t5"))
    assert "s0/stages/src" in pack.names and "pe/similarity/10" in pack.names
    assert np.isfinite(metas[0]["pe_gap"])


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("family", ("t5", "mbart"))
def test_presenter_mode_draws_each_part_of_the_page(family_root, family, view):
    """Presenter mode shows one part at a time (URL focus): every part the page offers this model draws."""
    at = run_app(view=view, text=TEXT, ckpt=family, present=1)
    assert not at.exception, at.exception
    parts = next(r for r in at.radio if r.key == "focus").options
    for part in parts[1:]:
        at = run_app(view=view, text=TEXT, ckpt=family, present=1, focus=part)
        assert not at.exception and at.get("plotly_chart"), (view, part)
