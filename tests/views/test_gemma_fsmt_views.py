"""AppTest of every page with the two newest families, tiny random models built and imported inside the test:
T5Gemma (rotary positions, grouped keys and values, a sliding window on its first layers, soft-capping; its source
without an end token) and FSMT (Moses + byte pairs with "</w>", a vocabulary per side). Each page draws what the
model recorded: the rotation, the window and the cap read from the trace, never rebuilt."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.app_support import array, run_app, serving, visible_text

VIEWS = ("Overview", "Embeddings", "Positional encoding", "Attention", "Inside one head", "Masks", "Decoding",
         "What if", "Alignment")
# Long enough for the tiny T5Gemma's window of 4 to cut (tests/t5gemma_support.py WINDOW).
TEXT = "Der Hund läuft im Park mit einem roten Ball und die Katze schläft."
EPS = float(np.finfo(np.float32).eps)  # the network runs in float32: its angles p·θ and products round at this


def rotation_tolerance(n: int, largest: float) -> float:
    """How far a float32 rotation at positions < n may stand from the exact one: the angle p·θ rounds by about
    n·ε, a cos or sin by ε, each turning a value of size `largest` (×4 for the products and the sum)."""
    return 4 * (n + 2) * EPS * largest


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A checkpoint root holding the tiny T5Gemma and FSMT, imported, served to the app."""
    pytest.importorskip("transformers")
    import torch

    from model.io.import_hf import import_hf
    from tests.fsmt_support import build_fsmt
    from tests.t5gemma_support import build_t5gemma

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        base = tmp_path_factory.mktemp("gemma_fsmt_views")
        import_hf(str(build_t5gemma(base / "hf" / "t5gemma")), base / "root" / "t5gemma")
        import_hf(str(build_fsmt(base / "hf" / "fsmt")), base / "root" / "fsmt")
    finally:
        torch.set_num_threads(threads)
    with serving(base / "root", "t5gemma"):
        yield base / "root"


@pytest.fixture(scope="module")
def gemma(root):
    """(the Translator, the SentenceTrace of TEXT) of the tiny T5Gemma."""
    from model.inference.translator import Translator

    tr = Translator.from_checkpoint(root / "t5gemma")
    return tr, tr.trace(TEXT).trace


def _specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _title(spec: dict) -> str:
    return (spec["layout"].get("title") or {}).get("text", "")


@pytest.mark.slow  # every view of two models
@pytest.mark.parametrize("family", ("t5gemma", "fsmt"))
def test_every_page_draws_both_families(root, family):
    for view in VIEWS:
        at = run_app(view=view, text=TEXT, ckpt=family)
        assert not at.exception, (family, view, at.exception)
        assert at.error.len == 0, (family, view, [e.value for e in at.error])
        assert at.get("plotly_chart") or view == "Alignment", (family, view)


def test_rotary_positions_are_drawn_from_the_recorded_queries_and_keys(root, gemma):
    _, st = gemma
    at = run_app(view="Positional encoding", text=TEXT, ckpt="t5gemma", layer=1, head=3, pe_ref=6, pe_key=2)
    assert not at.exception, at.exception
    said = visible_text(at)
    assert "no position vector" in said and "turned by the angle p·θᵢ" in said
    a, g = st.attn["enc_self"][0], 2 // 2  # head 3 reads key/value head 2 of 2 (4 query heads)
    n, q, k = len(st.src_tokens), a["q"][2][6], a["k"][g][2]
    check = re.search(r"gives the rotated ones the model recorded to ([0-9.e+-]+) \(largest value ([0-9.]+)\)", said)
    assert check and float(check.group(1)) <= rotation_tolerance(n, float(check.group(2)) + 0.05)
    recorded = float(a["rot_q"][2][6] @ a["rot_k"][g][2])
    # the formula's score of the unrotated pair against the model's float32 one: its rotation and its d-term dot
    score_tol = rotation_tolerance(n, 1.0) * float(np.linalg.norm(q) * np.linalg.norm(k)) * 2
    dist = next(s for s in _specs(at) if "their score q·k" in _title(s))
    mark = next(t for t in dist["data"] if t.get("name") == "this pair")
    assert array(mark["x"])[0] == 4 and array(mark["y"])[0] == pytest.approx(recorded, abs=score_tol)
    moved = next(t for t in dist["data"] if t.get("name") == "both moved")
    # the same distance, the same score: float64 arithmetic on values of the score's size
    assert np.ptp(array(moved["y"])) <= 64 * np.finfo(np.float64).eps * float(np.linalg.norm(q) * np.linalg.norm(k))
    turn = next(s for s in _specs(at) if "was turned" in _title(s))
    formula, query = (array(t["y"]) for t in turn["data"][:2])
    # what turned is the formula's angle; a pair's angle is as exact as its values against its length
    half = len(q) // 2
    pair_len = np.hypot(a["q"][2][6][:half], a["q"][2][6][half:])
    assert (np.abs(np.angle(np.exp(1j * (formula - query)))) <= rotation_tolerance(n, 1.0) / pair_len * 4).all()


def test_the_sliding_window_is_the_mask_the_model_recorded(root, gemma):
    _, st = gemma
    at = run_app(view="Masks", text=TEXT, ckpt="t5gemma")
    assert not at.exception, at.exception
    said = visible_text(at)
    assert "Sliding window" in said and "Local encoder layers: 1 (window 4)" in said
    local, full = st.attn["enc_self"][0]["mask"], st.attn["enc_self"][1]["mask"]
    n = len(local)
    i, j = np.indices((n, n))
    np.testing.assert_array_equal(local, full & (np.abs(i - j) <= 4))  # the window, as recorded
    hidden = int((~local).sum() - (~full).sum())
    assert hidden > 0 and f"the window hides {hidden} query–key cells" in said
    # layer 1's padding figure is a local layer's: the note says so, and the pads still get no weight
    assert "Encoder layer 1 is a local layer" in said
    leak = next(m for m in at.metric if m.label == "weight real tokens give to pads")
    assert float(leak.value) == 0.0
    off = run_app(view="Masks", text=TEXT, ckpt="t5gemma", pad_on=0)  # the real tokens near the pads reach them
    assert float(next(m for m in off.metric if m.label == "weight real tokens give to pads").value) > 0.0
    fig = next(s for s in _specs(at) if "encoder layer 1: window 4" in json.dumps(s, ensure_ascii=False))
    z = array(next(t for t in fig["data"] if t["type"] == "heatmap")["z"]).reshape(n, n)
    np.testing.assert_array_equal(z > 0.5, local)


def test_inside_one_head_shows_the_soft_cap_and_the_shared_key_head(root, gemma):
    tr, st = gemma
    cap = tr.cfg.attn_softcap
    at = run_app(view="Inside one head", text=TEXT, ckpt="t5gemma", kind="enc_self", layer=2, head=4)
    assert not at.exception, at.exception
    said = visible_text(at)
    assert f"Soft-capped: {cap:g}·tanh" in said and "heads 3–4 share this key and value head" in said
    assert "query_pre_attn_scalar" in said
    check = re.search(r"match the model's recorded ones to ([0-9.e+-]+);", said)
    scaled = st.attn["enc_self"][1]["scores"][3]
    # the page's float32 product of Q and K against the network's: d_head terms, each rounding by ε of the largest
    assert check and float(check.group(1)) <= 4 * tr.cfg.d_k * EPS * float(np.abs(scaled).max())
    row = next(s for s in _specs(at) if "soft-capped" in json.dumps(s, ensure_ascii=False))
    n = len(st.src_tokens)
    heat = [array(t["z"]).reshape(n, n) for t in row["data"] if t["type"] == "heatmap" and t.get("name") != "masked"]
    assert any(np.allclose(z, st.attn["enc_self"][1]["capped"][3], atol=4 * EPS * cap) for z in heat)  # as recorded


def test_attention_names_the_key_value_head_of_each_query_head(root):
    at = run_app(view="Attention", text=TEXT, ckpt="t5gemma", kind="enc_self")
    assert not at.exception
    titles = json.dumps([a.get("text", "") for s in _specs(at) for a in s["layout"].get("annotations", [])],
                        ensure_ascii=False)
    assert "head 1 · kv 1" in titles and "head 4 · kv 2" in titles


def test_fsmt_pages_show_its_byte_pairs_as_its_tokenizer_does(root):
    from model.inference.translator import Translator

    tr = Translator.from_checkpoint(root / "fsmt")
    tokens = tr.prepare(TEXT).tokens
    assert any(t.endswith("</w>") for t in tokens)
    at = run_app(view="Embeddings", text=TEXT, ckpt="fsmt")
    assert not at.exception
    said = visible_text(at)
    assert "byte-pair (Moses + BPE) vocabulary" in said
    assert tokens[0] in json.dumps(_specs(at), ensure_ascii=False)
