"""model.attention / model.transformer / the hook points: shapes, masks, and agreement with torch."""
from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from model.nn.attention import MultiHeadAttention
from model.nn.hooks import Hooks, attn_name, gate_hooks
from model.nn.trace import attention_arrays, probs
from model.nn.transformer import make_src_mask, make_tgt_mask, subsequent_mask
from model.text.tokenize import tokenize

torch.set_num_threads(1)

PAD = 1


@pytest.fixture
def batch(vocabs, pairs):
    """A padded batch of two sentences of different lengths: (src (2, s), tgt (2, t), src lens, tgt lens)."""
    sv, tv = vocabs
    src_ids = [sv.encode(tokenize(pairs[1][0], "de")) + [sv.eos_idx],
               sv.encode(tokenize(pairs[0][0], "de")) + [sv.eos_idx]]
    tgt_ids = [[tv.bos_idx] + tv.encode(tokenize(pairs[1][1], "en")),
               [tv.bos_idx] + tv.encode(tokenize(pairs[0][1], "en"))[:3]]
    s, t = max(map(len, src_ids)), max(map(len, tgt_ids))
    src = torch.full((2, s), PAD, dtype=torch.long)
    tgt = torch.full((2, t), PAD, dtype=torch.long)
    for r in range(2):
        src[r, : len(src_ids[r])] = torch.tensor(src_ids[r])
        tgt[r, : len(tgt_ids[r])] = torch.tensor(tgt_ids[r])
    src_lens = [len(x) for x in src_ids]
    tgt_lens = [len(x) for x in tgt_ids]
    assert src_lens[0] > src_lens[1] and tgt_lens[0] > tgt_lens[1]  # both sides really padded
    return src, tgt, src_lens, tgt_lens


def _attention(cache: dict, kind: str, layer: int) -> SimpleNamespace:
    """One attention's points in the (b, h, pos, d_k) layout the maths is written in; mask (b, 1, i, j)."""
    c = lambda point: cache[attn_name(kind, layer, point)]  # noqa: E731
    return SimpleNamespace(q=c("hook_q").transpose(1, 2), k=c("hook_k").transpose(1, 2),
                           v=c("hook_v").transpose(1, 2), scores=c("hook_scaled_scores"), probs=c("hook_pattern"),
                           mask=torch.isfinite(c("hook_attn_scores"))[:, :1], out=c("hook_z").transpose(1, 2))


def record(model, src, tgt, fwd_hooks=(), **kwargs):
    """(log-probs, every attention's points per kind and layer, the cache) of a run_with_cache."""
    log_probs, cache = model.run_with_cache(src, tgt, fwd_hooks=fwd_hooks, **kwargs)
    cfg = model.cfg
    layers = {"enc_self": cfg.n_encoder_layers, "dec_self": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}
    rec = SimpleNamespace(cache=cache, **{k: [_attention(cache, k, l) for l in range(n)] for k, n in layers.items()})
    return log_probs, rec


def kinds(trace):
    return {"enc_self": trace.enc_self, "dec_self": trace.dec_self, "cross": trace.cross}


# --------------------------------------------------------------------------- trace shapes


def test_every_trace_field_has_the_documented_shape(tiny_model, batch):
    src, tgt, _, _ = batch
    cfg = tiny_model.cfg
    b, s, t, h, d, dk, V = 2, src.shape[1], tgt.shape[1], cfg.n_heads, cfg.d_model, cfg.d_k, cfg.tgt_vocab_size
    log_probs, trace = record(tiny_model, src, tgt)
    assert log_probs.shape == (b, t, V)
    torch.testing.assert_close(log_probs, tiny_model(src, tgt), atol=1e-5, rtol=0)

    c = trace.cache
    for at, n in (("", s), ("decoder.", t)):
        token, scaled, positional = c[at + "hook_token_embed"], c[at + "hook_embed"], c[at + "hook_pos_embed"]
        total = c[(at or "encoder.") + "0.hook_resid_pre"]
        assert token.shape == scaled.shape == positional.shape == total.shape == (b, n, d)
        torch.testing.assert_close(scaled, token * math.sqrt(d))
        torch.testing.assert_close(total, scaled + positional)

    dims = {"enc_self": (s, s), "dec_self": (t, t), "cross": (t, s)}
    n_layers = {"enc_self": cfg.n_encoder_layers, "dec_self": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}
    for kind, records in kinds(trace).items():
        assert len(records) == n_layers[kind]
        i, j = dims[kind]
        for layer, rec in enumerate(records):
            assert rec.q.shape == (b, h, i, dk)
            assert rec.k.shape == (b, h, j, dk)
            assert rec.v.shape == (b, h, j, dk)
            assert rec.scores.shape == (b, h, i, j)
            assert rec.probs.shape == (b, h, i, j)
            assert rec.mask.shape == (b, 1, i, j) and rec.mask.dtype == torch.bool
            assert rec.out.shape == (b, h, i, dk)
            # out really is probs @ V (eval mode: no dropout), scores really QKᵀ/√d_k
            torch.testing.assert_close(rec.out, rec.probs @ rec.v)
            torch.testing.assert_close(rec.scores, rec.q @ rec.k.transpose(-2, -1) / math.sqrt(dk))
            arrays = attention_arrays(c, kind, layer, 1)  # what a page's SentenceTrace holds: batch row 1
            assert arrays["probs"].shape == (h, i, j) and arrays["mask"].shape == (i, j)
            assert arrays["q"].shape == (h, i, dk) and arrays["out"].shape == (h, i, dk)
            assert arrays["mask"].dtype == bool
            np.testing.assert_array_equal(arrays["probs"], rec.probs[1].detach().numpy())
            np.testing.assert_array_equal(arrays["mask"], rec.mask[1, 0].numpy())
        assert probs(c, kind, n_layers[kind], 1).shape == (n_layers[kind], h, i, j)


def test_forward_without_hooks_returns_log_probs_only(tiny_model, batch):
    src, tgt, _, _ = batch
    out = tiny_model(src, tgt)
    assert isinstance(out, torch.Tensor) and out.shape == (2, tgt.shape[1], tiny_model.cfg.tgt_vocab_size)


def test_every_attention_row_sums_to_one(tiny_model, batch):
    src, tgt, _, _ = batch
    _, trace = record(tiny_model, src, tgt)
    for kind, records in kinds(trace).items():
        for rec in records:
            sums = rec.probs.sum(-1)
            torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0, msg=kind)
            assert bool((rec.probs >= 0).all())


# --------------------------------------------------------------------------- masks


def test_padded_source_keys_get_exactly_zero(tiny_model, batch):
    src, tgt, src_lens, _ = batch
    _, trace = record(tiny_model, src, tgt)
    short = src_lens[1]
    for rec in trace.enc_self + trace.cross:
        assert bool((rec.probs[1, :, :, short:] == 0.0).all())  # padded keys of the short sentence
        assert bool((rec.probs[1, :, :, :short] > 0.0).any(-1).all())  # real keys do get weight
        assert not bool(rec.mask[1, 0, :, short:].any()) and bool(rec.mask[1, 0, :, :short].all())
        assert bool(rec.mask[0].all())  # the long sentence has no padding


def test_future_target_positions_get_exactly_zero(tiny_model, batch):
    src, tgt, _, tgt_lens = batch
    _, trace = record(tiny_model, src, tgt)
    t = tgt.shape[1]
    upper = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    for rec in trace.dec_self:
        assert bool((rec.probs[..., upper] == 0.0).all())
        assert not bool(rec.mask[..., upper].any())
        # the diagonal and below are allowed (except padded keys of the short target)
        assert bool((rec.probs[0][..., ~upper] > 0.0).all())
        assert bool((rec.probs[1, :, :, tgt_lens[1]:] == 0.0).all())


def test_padded_queries_still_compute_rows_that_sum_to_one(tiny_model, batch):
    src, tgt, src_lens, tgt_lens = batch
    _, trace = record(tiny_model, src, tgt)
    for rec in trace.enc_self:
        rows = rec.probs[1, :, src_lens[1]:, :]  # queries at padded source positions
        assert rows.numel() > 0
        torch.testing.assert_close(rows.sum(-1), torch.ones(rows.shape[:-1]), atol=1e-5, rtol=0)
    for rec in trace.dec_self + trace.cross:
        rows = rec.probs[1, :, tgt_lens[1]:, :]  # queries at padded target positions
        assert rows.numel() > 0
        torch.testing.assert_close(rows.sum(-1), torch.ones(rows.shape[:-1]), atol=1e-5, rtol=0)


def test_mask_helpers():
    src = torch.tensor([[5, 6, 7], [5, PAD, PAD]])
    m = make_src_mask(src, PAD)
    assert m.shape == (2, 1, 1, 3) and m.dtype == torch.bool
    assert m[:, 0, 0].tolist() == [[True, True, True], [True, False, False]]
    assert bool(make_src_mask(src, PAD, use_padding_mask=False).all())
    sm = subsequent_mask(3)
    assert sm.shape == (1, 1, 3, 3) and sm[0, 0].tolist() == [[True, False, False], [True, True, False],
                                                              [True, True, True]]
    tm = make_tgt_mask(torch.tensor([[2, 5, PAD]]), PAD)
    assert tm.shape == (1, 1, 3, 3)
    assert tm[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert make_tgt_mask(torch.tensor([[2, 5, PAD]]), PAD, causal=False)[0, 0].tolist() == [[True, True, False]] * 3


# --------------------------------------------------------------------------- agreement with torch


def _attention_inputs(d=32, b=2, i=5, j=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(b, i, d, generator=g)
    key = torch.randn(b, j, d, generator=g)
    value = torch.randn(b, j, d, generator=g)
    may_attend = torch.ones(b, j, dtype=torch.bool)
    may_attend[1, 4:] = False  # the second example has 3 padded keys
    return query, key, value, may_attend


def _mha(d=32, h=4, seed=0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d, h).eval()
    for lin in (mha.w_q, mha.w_k, mha.w_v, mha.w_o):
        nn.init.normal_(lin.bias, std=0.1)  # make the biases matter
    return mha


def test_equals_torch_multihead_attention_with_the_same_weights():
    d, h = 32, 4
    ours = _mha(d, h)
    ref = nn.MultiheadAttention(d, h, bias=True, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        ref.out_proj.weight.copy_(ours.w_o.weight)
        ref.out_proj.bias.copy_(ours.w_o.bias)
    query, key, value, may_attend = _attention_inputs(d)
    mask = may_attend[:, None, None, :]  # ours: (b, 1, 1, j), True = may attend
    with torch.no_grad():
        cache: dict = {}
        out_traced = ours(query, key, value, mask, Hooks(cache=cache))
        rec = SimpleNamespace(probs=cache["hook_pattern"])
        out_fused = ours(query, key, value, mask)
        # torch: key_padding_mask True = ignore
        ref_out, ref_per_head = ref(query, key, value, key_padding_mask=~may_attend, need_weights=True,
                                    average_attn_weights=False)
        _, ref_avg = ref(query, key, value, key_padding_mask=~may_attend, need_weights=True, average_attn_weights=True)
    torch.testing.assert_close(out_traced, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_fused, ref_out, atol=1e-5, rtol=1e-5)
    assert ref_per_head.shape == rec.probs.shape == (2, h, 5, 7)
    torch.testing.assert_close(rec.probs, ref_per_head, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(rec.probs.mean(1), ref_avg, atol=1e-6, rtol=1e-5)
    assert bool((rec.probs[1, :, :, 4:] == 0).all())


def test_per_head_loop_equals_batched_computation():
    d, h = 32, 4
    dk = d // h
    mha = _mha(d, h, seed=3)
    query, key, value, may_attend = _attention_inputs(d, seed=3)
    mask = may_attend[:, None, None, :]
    with torch.no_grad():
        cache: dict = {}
        out = mha(query, key, value, mask, Hooks(cache=cache))
        rec = SimpleNamespace(q=cache["hook_q"].transpose(1, 2), scores=cache["hook_scaled_scores"],
                              probs=cache["hook_pattern"], out=cache["hook_z"].transpose(1, 2))
        heads = []
        for n in range(h):
            sl = slice(n * dk, (n + 1) * dk)
            q = query @ mha.w_q.weight[sl].T + mha.w_q.bias[sl]  # (b, i, d_k)
            k = key @ mha.w_k.weight[sl].T + mha.w_k.bias[sl]
            v = value @ mha.w_v.weight[sl].T + mha.w_v.bias[sl]
            scores = q @ k.transpose(-2, -1) / math.sqrt(dk)  # (b, i, j)
            probs = torch.softmax(scores.masked_fill(~may_attend[:, None, :], float("-inf")), dim=-1)
            torch.testing.assert_close(rec.q[:, n], q)
            torch.testing.assert_close(rec.scores[:, n], scores)
            torch.testing.assert_close(rec.probs[:, n], probs)
            head = probs @ v
            torch.testing.assert_close(rec.out[:, n], head, atol=1e-6, rtol=1e-5)
            heads.append(head)
        looped = mha.w_o(torch.cat(heads, dim=-1))
    torch.testing.assert_close(out, looped, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- traced vs fused, determinism


def test_traced_and_untraced_paths_agree_for_the_whole_model(tiny_model, batch):
    src, tgt, _, _ = batch
    with torch.no_grad():
        fused = tiny_model(src, tgt)
        traced, _ = record(tiny_model, src, tgt)
        torch.testing.assert_close(traced, fused, atol=1e-5, rtol=0)
        for flags in ({"use_src_padding_mask": False}, {"use_causal_mask": False}):
            a = tiny_model(src, tgt, **flags)
            b, _ = record(tiny_model, src, tgt, **flags)
            torch.testing.assert_close(b, a, atol=1e-5, rtol=0)


def test_post_norm_variant_also_agrees(make_model, batch):
    model = make_model(seed=5, norm_first=False, tie_weights=False)
    src, tgt, _, _ = batch
    with torch.no_grad():
        a = model(src, tgt)
        b, trace = record(model, src, tgt)
    torch.testing.assert_close(b, a, atol=1e-5, rtol=0)
    assert model.generator.proj.weight is not model.tgt_embed.lut.weight


def test_same_input_twice_is_identical_in_eval_mode(tiny_model, batch):
    src, tgt, _, _ = batch
    a, ta = record(tiny_model, src, tgt)
    b, tb = record(tiny_model, src, tgt)
    assert torch.equal(a, b)
    for ra, rb in zip(ta.enc_self + ta.dec_self + ta.cross, tb.enc_self + tb.dec_self + tb.cross):
        assert torch.equal(ra.probs, rb.probs) and torch.equal(ra.out, rb.out)
    c = tiny_model(src, tgt)
    d = tiny_model(src, tgt)
    assert torch.equal(c, d)


def test_dropout_only_acts_in_training_mode(make_model, batch):
    model = make_model(seed=2, dropout=0.3, attn_dropout=0.3)
    src, tgt, _, _ = batch
    with torch.no_grad():
        e1 = model(src, tgt)
        e2 = model(src, tgt)
        model.train()
        torch.manual_seed(0)
        t1 = model(src, tgt)
        t2 = model(src, tgt)
    assert torch.equal(e1, e2)
    assert not torch.allclose(t1, t2)


# --------------------------------------------------------------------------- head gates and switching masks off


def test_a_gate_on_hook_z_equals_zeroing_that_heads_output_columns():
    d, h, off = 32, 4, 2
    dk = d // h
    mha = _mha(d, h, seed=7)
    query, key, value, may_attend = _attention_inputs(d, seed=7)
    mask = may_attend[:, None, None, :]
    head_mask = torch.ones(h)
    head_mask[off] = 0
    zeroed = copy.deepcopy(mha)
    with torch.no_grad():
        zeroed.w_o.weight[:, off * dk : (off + 1) * dk] = 0
        gate = [("hook_z", lambda z, name: z * head_mask.view(1, 1, h, 1))]
        full = mha(query, key, value, mask)
        cache: dict = {}
        masked = mha(query, key, value, mask, Hooks(gate, cache))
        masked_fused = mha(query, key, value, mask, Hooks(gate))
        expected = zeroed(query, key, value, mask)
    assert not torch.allclose(full, masked, atol=1e-4)
    torch.testing.assert_close(masked, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(masked_fused, expected, atol=1e-5, rtol=1e-5)
    # the cache keeps what went on into W_O: the switched-off head's output is 0, the others' are not
    assert bool((cache["hook_z"][:, :, off] == 0).all()) and bool(cache["hook_z"].abs().sum() > 0)


@pytest.mark.parametrize("kind,layer_attr",
                         [("enc_self", "attn"), ("dec_self", "attn"), ("cross", "cross_attn")])
def test_model_gate_hooks_switch_one_head_off(tiny_model, batch, kind, layer_attr):
    src, tgt, _, _ = batch
    cfg = tiny_model.cfg
    dk = cfg.d_k
    n_layers = cfg.n_encoder_layers if kind == "enc_self" else cfg.n_decoder_layers
    hm = torch.ones(n_layers, cfg.n_heads)
    hm[1, 3] = 0  # layer 2, head 4
    zeroed = copy.deepcopy(tiny_model)
    layers = zeroed.encoder if kind == "enc_self" else zeroed.decoder
    with torch.no_grad():
        getattr(layers[1], layer_attr).w_o.weight[:, 3 * dk : 4 * dk] = 0
        full = tiny_model(src, tgt)
        masked = tiny_model.run_with_hooks(src, tgt, gate_hooks({kind: hm}))
        masked_traced, _ = record(tiny_model, src, tgt, gate_hooks({kind: hm}))
        expected = zeroed(src, tgt)
        all_on = tiny_model.run_with_hooks(src, tgt, gate_hooks({kind: torch.ones(n_layers, cfg.n_heads)}))
    assert not torch.allclose(full, masked, atol=1e-4)
    torch.testing.assert_close(masked, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked_traced, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(all_on, full, atol=0, rtol=0)


def test_masks_can_be_switched_off(tiny_model, batch):
    src, tgt, src_lens, tgt_lens = batch
    t = tgt.shape[1]
    upper = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        lp, trace = record(tiny_model, src, tgt, use_src_padding_mask=False, use_causal_mask=False)
    assert bool(torch.isfinite(lp).all())
    for rec in trace.enc_self + trace.cross:
        assert bool(rec.mask.all())
        assert bool((rec.probs[1, :, :, src_lens[1]:] > 0).all())  # padded source keys now get weight
    for rec in trace.dec_self:
        assert bool(rec.mask[0, 0][upper].all())
        assert bool((rec.probs[0][..., upper] > 0).all())  # the future is visible
        # target padding is still masked
        assert bool((rec.probs[1, :, :, tgt_lens[1]:] == 0).all())
    # only the source padding mask off: the causal structure remains
    _, trace = record(tiny_model, src, tgt, use_src_padding_mask=False)
    for rec in trace.dec_self:
        assert bool((rec.probs[..., upper] == 0).all())
    # switching masks off changes the (non-padded) predictions of the long example
    lp_on = tiny_model(src, tgt)
    assert not torch.allclose(lp_on[0], lp[0], atol=1e-4)

