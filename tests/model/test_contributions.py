"""Value norms and ALTI+ (model/analysis/contributions.py) equal their formulas: every attention block's output is
the sum of its transformed vectors, residual and bias (float64, 1e-5) on the shipped model's layout (pre-norm
LayerNorm), post-norm (Marian's layout) and RMSNorm with a position bias (T5's); every ALTI row sums to 1; the
rollout's source share is what its source columns add up to."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from model.analysis import contributions as C
from model.nn.config import ModelConfig
from model.nn.layers import GemmaRMSNorm
from model.nn.transformer import EncoderDecoder

LAYOUTS = {"pre-norm": {}, "post-norm": {"norm_first": False},
           "T5-like": {"norm": "rms", "norm_eps": 1e-6, "positions": "relative", "rel_buckets": 8,
                       "rel_max_distance": 20, "scale_attention": False, "bias": False},
           "Gemma-like": {"norm": "gemma_rms", "norm_eps": 1e-6, "positions": "rotary", "n_kv_heads": 2,
                          "sublayer_post_norm": True, "attn_softcap": 3.0, "query_pre_attn_scalar": 12.0, "bias": False,
                          "encoder_windows": "2,0", "decoder_windows": "2,0"}}


def _model(**kw) -> EncoderDecoder:
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=32, n_heads=4, n_encoder_layers=2,
                      n_decoder_layers=2, d_ff=64, dropout=0.0, attn_dropout=0.0, **kw)
    model = EncoderDecoder(cfg).eval()
    with torch.no_grad():  # norms away from 1 and 0, so that a wrong σ or a forgotten β shows
        for m in model.modules():
            if isinstance(m, GemmaRMSNorm):  # its scale is 1 + w
                m.weight.uniform_(-0.5, 0.5)
            elif isinstance(m, (torch.nn.LayerNorm, torch.nn.RMSNorm)):
                m.weight.uniform_(0.5, 1.5)
                if getattr(m, "bias", None) is not None:
                    m.bias.uniform_(-0.3, 0.3)
    return model


def _pass(model):
    src, tgt = torch.tensor([[5, 6, 7, 8, 9, 3]]), torch.tensor([[2, 10, 11, 12, 13]])
    cfg = model.cfg
    with torch.inference_mode():
        _, cache = model.run_with_cache(src, tgt, C.points(cfg.n_encoder_layers, cfg.n_decoder_layers))
    return cache


def check_blocks(model, cache) -> None:
    """Every attention block of `model` in a pass's `cache` (the names of C.points) decomposes exactly: its
    transformed vectors, residual and bias give back its recorded output; its ALTI rows are shares summing to 1,
    and nothing flows from a later decoder position."""
    cfg = model.cfg
    for kind, n in (("enc_self", cfg.n_encoder_layers), ("dec_self", cfg.n_decoder_layers),
                    ("cross", cfg.n_decoder_layers)):
        for layer in range(n):
            res, out, prefix = C._points(kind, layer)
            attn, sub = C._blocks(model, kind, layer)
            c, y = C.block_alti(cache[res][0], cache[f"{prefix}.hook_v"][0], cache[f"{prefix}.hook_pattern"][0],
                                attn, sub.norm, sub.norm_first, kind == "cross", C.post_norm(model, kind, layer))
            torch.testing.assert_close(y, cache[out][0].double(), atol=1e-5, rtol=1e-5, msg=f"{kind} {layer}")
            np.testing.assert_allclose(c.sum(-1), 1.0, atol=1e-9)
            assert (c >= 0).all()
            if kind == "dec_self":
                assert np.allclose(np.triu(c, 1), 0.0)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_blocks_decomposition_is_exact(layout):
    model = _model(**LAYOUTS[layout])
    check_blocks(model, _pass(model))


@torch.no_grad()
def test_value_norms_are_the_norms_of_what_each_head_moves():
    model = _model()
    cache = _pass(model)
    v, pattern = cache["decoder.1.cross_attn.hook_v"][0], cache["decoder.1.cross_attn.hook_pattern"][0]
    w_o = model.decoder[1].cross_attn.w_o
    per_head, layer = C.value_norms(v, pattern, w_o)
    h, d_head = v.shape[1], v.shape[2]
    i, j, head = 2, 3, 1
    moved = pattern[head, i, j].double() * (v[j, head].double() @ w_o.weight.double()[:, head * d_head:(head + 1)
                                                                                        * d_head].T)
    assert per_head[head, i, j] == pytest.approx(float(moved.norm()), rel=1e-9)
    z = sum(pattern[k, i, j].double() * (v[j, k].double() @ w_o.weight.double()[:, k * d_head:(k + 1) * d_head].T)
            for k in range(h))
    assert layer[i, j] == pytest.approx(float(z.norm()), rel=1e-9)


def test_the_rollout_shares_sum_to_one_and_the_source_share_is_its_source_columns():
    model = _model()
    out = C.from_cache(model, _pass(model), [f"s{i}" for i in range(6)], [f"t{i}" for i in range(5)])
    total = out.alti["total"]
    assert total.shape == (2, 5, 11) and out.alti["cross"].shape == (2, 5, 7)
    np.testing.assert_allclose(total.sum(-1), 1.0, atol=1e-9)
    np.testing.assert_allclose(out.alti["source_share"], total[-1][:, :6].sum(-1))
    assert np.allclose(np.triu(total[-1][:, 6:], 1), 0.0)  # no share from a later decoder position
    assert out.value_norm["enc_self"].shape == (2, 4, 6, 6) and out.attention["cross"].shape == (2, 4, 5, 6)


def test_the_encoder_rollout_multiplies_the_layers():
    c = np.random.default_rng(0).dirichlet(np.ones(4), size=(3, 4))  # (L, S, S), rows sum to 1
    r = C.rollout_encoder(c)
    np.testing.assert_allclose(r[2], c[2] @ c[1] @ c[0])


def test_the_command_line_writes_the_record_and_refuses_an_empty_sentence(tmp_path, capsys):
    import json

    from model.contributions import main
    from tests.tiny_checkpoint import GERMAN, make_tiny_checkpoint

    folder = make_tiny_checkpoint(tmp_path / "demo") or tmp_path / "demo"
    out = tmp_path / "c.json"
    assert main([GERMAN[0], "--checkpoint", str(folder), "--out", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    s, t = len(record["source_tokens"]), len(record["decoder_tokens"])
    assert record["decoder_tokens"][0] == "<bos>" and "<eos>" not in record["decoder_tokens"]
    assert np.asarray(record["alti"]["total"]).shape[1:] == (t, s + t)
    assert np.asarray(record["alti"]["cross"]).shape[1:] == (t, s + 1)
    assert np.asarray(record["value_norm"]["cross"]).shape[2:] == (t, s)
    assert main(["", "--checkpoint", str(folder)]) == 2
    assert "error: the text has no tokens" in capsys.readouterr().err


def test_the_shipped_models_blocks_decompose_exactly():
    from pathlib import Path

    from model.inference.translator import Translator

    folder = Path(__file__).resolve().parents[2] / "checkpoints" / "multi30k-de-en"
    tr = Translator.from_checkpoint(folder)
    model = tr.model
    src, tgt = tr.forced_tensors("Ein Mann mit einem orangen Hut starrt auf etwas.")
    with torch.inference_mode():
        _, cache = model.run_with_cache(src, tgt, C.points(model.cfg.n_encoder_layers, model.cfg.n_decoder_layers))
    check_blocks(model, cache)
