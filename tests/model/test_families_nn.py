"""model/nn: what other translation families are, as config fields (RMSNorm, learned or relative positions, an
embedding norm, unscaled scores, a gated feed-forward, no biases, the generator's scale), each checked against the
formula written out here or against transformers' own code, and every point of the pass named."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from model.nn.config import ModelConfig
from model.nn.hooks import Hooks
from model.nn.layers import Embeddings, FeedForward, RelativePositionBias, sinusoidal_encoding
from model.nn.transformer import hook_names, make_src_mask, make_tgt_mask

T5_LIKE = {"norm": "rms", "norm_eps": 1e-6, "positions": "relative", "rel_buckets": 8, "rel_max_distance": 20,
           "scale_attention": False, "ff_gated": True, "bias": False, "scale_embedding": False,
           "final_logits_bias": False, "activation": "gelu"}
MBART_LIKE = {"positions": "learned", "pos_offset": 2, "embed_norm": True, "activation": "gelu"}
M2M_LIKE = {"pe_layout": "fairseq", "pos_offset": 2}
# T5Gemma's network (tests/model/test_t5gemma.py checks it against transformers): every version-5 field on
GEMMA_LIKE = {"norm": "gemma_rms", "norm_eps": 1e-6, "positions": "rotary", "rope_base": 1000.0, "n_kv_heads": 2,
              "encoder_windows": "4,0", "decoder_windows": "4,0", "attn_softcap": 5.0, "final_softcap": 3.0,
              "sublayer_post_norm": True, "query_pre_attn_scalar": 12.0, "ff_gated": True, "activation": "gelu_new",
              "bias": False, "final_logits_bias": False, "n_encoder_layers": 2, "n_decoder_layers": 2}


def test_the_fairseq_table_is_m2m100s_formula():
    d, n = 10, 7
    half = d // 2
    freq = np.exp(np.arange(half) * -(math.log(10000) / (half - 1)))
    angle = np.arange(n)[:, None] * freq[None, :]
    want = np.concatenate([np.sin(angle), np.cos(angle)], axis=1)
    np.testing.assert_allclose(sinusoidal_encoding(n, d, "fairseq").numpy(), want, atol=1e-6)
    assert sinusoidal_encoding(n, 9, "fairseq")[:, -1].abs().max() == 0  # an odd width ends in a zero column


def test_position_p_reads_row_p_plus_the_offset_and_the_norm_comes_after_the_sum():
    torch.manual_seed(0)
    emb = Embeddings(20, 8, 16, 0.0, 1, scale=True, positions="learned", pos_offset=2, norm="layer").eval()
    ids = torch.tensor([[5, 6, 7]])
    got = emb(ids, offset=1)
    want = torch.nn.functional.layer_norm(emb.lut(ids) * math.sqrt(8) + emb.pos.weight[3:6], (8,),
                                          emb.norm.weight, emb.norm.bias)
    torch.testing.assert_close(got, want)
    assert torch.equal(emb.table(), emb.pos.weight[2:])
    fixed = Embeddings(20, 8, 16, 0.0, 1, pe_layout="fairseq", pos_offset=2)
    torch.testing.assert_close(fixed.table()[0], sinusoidal_encoding(18, 8, "fairseq")[2])


def test_relative_buckets_are_t5s():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    distance = torch.arange(-60, 61).unsqueeze(0)
    for bidirectional in (True, False):
        ours = RelativePositionBias(32, 128, 4, bidirectional).buckets(distance)
        theirs = t5.T5Attention._relative_position_bucket(distance, bidirectional, 32, 128)
        assert torch.equal(ours, theirs), bidirectional
    assert len(set(ours.tolist()[0])) > 10  # the buckets are not all one


def test_the_gated_feed_forward_multiplies_the_activation_by_the_second_projection():
    torch.manual_seed(0)
    ff = FeedForward(6, 10, 0.0, "gelu", gated=True, bias=False).eval()
    x = torch.randn(2, 3, 6)
    want = ff.w_2(torch.nn.functional.gelu(ff.w_gate(x)) * ff.w_1(x))
    cache: dict = {}
    torch.testing.assert_close(ff(x, Hooks(cache=cache)), want)
    assert list(cache) == ["hook_pre", "hook_pre_linear", "hook_post"]
    assert all(m.bias is None for m in (ff.w_1, ff.w_2, ff.w_gate))


@pytest.mark.parametrize("family", [T5_LIKE, MBART_LIKE, M2M_LIKE, GEMMA_LIKE], ids=["t5", "mbart", "m2m100", "gemma"])
def test_each_family_names_every_point_and_both_attention_paths_agree(make_model, encoded_pairs, family):
    model = make_model(**family)
    src, tgt = pairs_tensors(encoded_pairs)
    with torch.inference_mode():
        fused = model(src, tgt)
        cache: dict = {}
        explicit = model(src, tgt, Hooks(cache=cache))
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-5)
    assert list(cache) == hook_names(model.cfg)


def test_t5_scores_are_unscaled_and_carry_the_bias(make_model, encoded_pairs):
    model = make_model(**T5_LIKE)
    src, tgt = pairs_tensors(encoded_pairs)
    cache: dict = {}
    with torch.inference_mode():
        model(src, tgt, Hooks(cache=cache))
    q, k = cache["encoder.1.attn.hook_q"], cache["encoder.1.attn.hook_k"]  # (b, s, h, d_k)
    want = torch.einsum("bihd,bjhd->bhij", q, k) + cache["hook_pos_bias"]
    torch.testing.assert_close(cache["encoder.1.attn.hook_scaled_scores"], want, atol=1e-5, rtol=1e-5)
    assert cache["decoder.hook_pos_bias"].shape == (1, model.cfg.n_heads, tgt.shape[1], tgt.shape[1])
    assert isinstance(model.encoder_final_ln, torch.nn.RMSNorm) and model.encoder_final_ln.eps == 1e-6
    assert not any(name.endswith(".bias") for name, _ in model.encoder.named_parameters())


@pytest.mark.parametrize("family", [T5_LIKE, MBART_LIKE, GEMMA_LIKE], ids=["t5", "mbart", "gemma"])
def test_incremental_decoding_equals_the_teacher_forced_pass(make_model, encoded_pairs, family):
    """The decoder's positions (a learned table, a relative bias over the cached keys, rotary angles and sliding
    windows) follow the cache."""
    from model.inference.decode import decode_step

    model = make_model(**family)
    src, tgt = torch.tensor([encoded_pairs[1][0]]), torch.tensor([[2] + encoded_pairs[1][1]])  # no padding
    with torch.inference_mode():
        lp = model(src, tgt)
        src_mask = make_src_mask(src, model.cfg.pad_idx)
        memory, cache = model.encode(src, src_mask), model.new_cache()
        for i in range(tgt.shape[1]):
            step = decode_step(model, memory, src_mask, tgt[:, i : i + 1], cache)[0]
            torch.testing.assert_close(step, lp[0, i], atol=1e-4, rtol=1e-4)


def test_the_generator_scale_multiplies_the_decoders_output(make_model, encoded_pairs):
    plain, scaled = make_model(), make_model(generator_scale=0.25)
    scaled.load_state_dict(plain.state_dict())
    src, tgt = pairs_tensors(encoded_pairs)
    with torch.inference_mode():
        src_mask, tgt_mask = make_src_mask(src, 1), make_tgt_mask(tgt, 1)
        a = plain.decode(plain.encode(src, src_mask), src_mask, tgt, tgt_mask)
        b = scaled.decode(scaled.encode(src, src_mask), src_mask, tgt, tgt_mask)
    torch.testing.assert_close(b, a * 0.25)


def test_a_version_3_config_round_trips_and_refuses_unknown_kinds():
    cfg = ModelConfig(src_vocab_size=10, tgt_vocab_size=10, **T5_LIKE)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="positions"):
        ModelConfig(src_vocab_size=10, tgt_vocab_size=10, positions="alibi")


def pairs_tensors(pairs) -> tuple[torch.Tensor, torch.Tensor]:
    """The first two tiny pairs as (2, s) source and (2, t) decoder input, right-padded with 1."""
    srcs, tgts = [p[0] for p in pairs[:2]], [[2] + p[1] for p in pairs[:2]]

    def pad(rows):
        n = max(map(len, rows))
        return torch.tensor([r + [1] * (n - len(r)) for r in rows])

    return pad(srcs), pad(tgts)


def test_hooks_md_lists_the_points_other_families_add():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "hooks.md").read_text(encoding="utf-8")
    section = text.split("## Points of other families", 1)[1].split("\n## ", 1)[0]
    listed = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    base = set(hook_names(ModelConfig(src_vocab_size=10, tgt_vocab_size=10)))
    added = set()
    for family in (T5_LIKE, MBART_LIKE, GEMMA_LIKE):  # a layer's point once: {l}, and {stack} where both have it
        for name in set(hook_names(ModelConfig(src_vocab_size=10, tgt_vocab_size=10, **family))) - base:
            added.add(re.sub(r"\.\d+\.", ".{l}.", name))
    both = {n.split(".", 1)[1] for n in added if n.startswith("encoder.")} & {
        n.split(".", 1)[1] for n in added if n.startswith("decoder.")}
    added = {f"{{stack}}.{n.split('.', 1)[1]}" if n.split(".", 1)[0] in ("encoder", "decoder")
             and n.split(".", 1)[1] in both else n for n in added}
    assert listed == added
