"""The Translator's research surface (model/inference/research.py, model/nn/cache.py): TransformerLens's calls,
one teacher-forcing convention, the cache's helpers, weights as TransformerLens shapes them, batches, and the
errors a researcher's mistakes get."""
from __future__ import annotations

import numpy as np
import pytest
import torch

TEXT = "Ein Mann fährt Fahrrad."
OTHER = "Zwei Hunde spielen im Schnee."


def test_a_transformer_lens_hook_equals_switching_the_head_off(translator):
    def ablate(z, hook):
        assert hook.name == "decoder.1.cross_attn.hook_z" == hook  # TransformerLens's hook.name; still a str
        z[:, :, 2] = 0
        return z

    ablated = translator.run_with_hooks(TEXT, fwd_hooks=[("decoder.1.cross_attn.hook_z", ablate)])
    off = translator.run_with_hooks(TEXT, fwd_hooks=translator.hooks(off_heads=[("cross", 1, 2)]))
    clean = translator.run_with_hooks(TEXT)
    assert (ablated - clean).abs().max() > 1e-4  # the head mattered
    torch.testing.assert_close(ablated, off, atol=1e-6, rtol=0)
    one = translator.run_with_hooks(TEXT, fwd_hooks=("decoder.1.cross_attn.hook_z", ablate))  # one pair alone
    torch.testing.assert_close(one, off, atol=1e-6, rtol=0)


@pytest.mark.parametrize("bad, error, words", [
    (lambda x, hook: x.numpy(), TypeError, "returned a ndarray, not a torch.Tensor"),
    (lambda x, hook: x.double(), ValueError, "returned dtype torch.float64, not the activation's torch.float32"),
    (lambda x, hook: x[:, :1], ValueError, "returned shape"),
])
def test_a_hooks_return_is_checked_and_the_error_names_the_point(translator, bad, error, words):
    with pytest.raises(error, match="decoder.0.hook_resid_post") as e:
        translator.run_with_hooks(TEXT, fwd_hooks=[("decoder.0.hook_resid_post", bad)])
    assert words in str(e.value)


def test_mistakes_get_clear_messages(translator):
    with pytest.raises(ValueError, match="did you mean decoder.0.cross_attn.hook_pattern"):
        translator.run_with_cache(TEXT, names_filter="decoder.0.cross_attn.hook_patern")
    with pytest.raises(ValueError, match="keeps no hook point"):
        translator.run_with_cache(TEXT, names_filter=lambda n: n.endswith("hook_nothing"))
    with pytest.raises(TypeError, match="keyword arguments"):
        translator.run_with_cache(TEXT, "decoder.0.hook_resid_post")  # names_filter given where the target goes
    with pytest.raises(TypeError, match="keyword arguments"):
        translator.run_with_hooks(TEXT, [("decoder.0.hook_resid_post", lambda x, h: x)])
    with pytest.raises(TypeError, match=r"fwd_hooks\[0\]"):
        translator.run_with_hooks(TEXT, fwd_hooks=["decoder.0.hook_resid_post"])
    with pytest.raises(TypeError, match="a sentence \\(str\\) or a list of sentences"):
        translator.run_with_cache([TEXT, 3])
    with pytest.raises(ValueError, match="return_type"):
        translator.run_with_cache(TEXT, return_type="probs")
    with pytest.raises(ValueError, match="one call only"):
        translator.run_with_hooks(TEXT, reset_hooks_end=False)
    log_probs, cache = translator.run_with_cache(TEXT, None)  # None: the greedy translation, not a filter
    with pytest.raises(KeyError, match="did you mean"):
        cache["decoder.0.hook_resid_pos"]


def test_one_teacher_forcing_convention_for_every_method(translator):
    v = translator.tgt_vocab
    tokens = translator.translate(TEXT).raw_tokens
    log_probs, cache = translator.run_with_cache(TEXT, tokens)
    labels = v.encode(tokens) + [v.eos_idx]  # row n scores labels[n]; </s> appended
    assert cache.tgt_tokens == [v.token("bos")] + tokens  # the decoder reads <bos> and every label but the last
    scored = log_probs[0].gather(-1, torch.tensor(labels)[:, None]).sum()
    # score() runs the fused attention kernel, the cache the written-out one: float32 sums in another order, over
    # every token's log-probability
    assert float(scored) == pytest.approx(translator.score(TEXT, tokens), abs=1e-4)
    forced = translator.teacher_forced(TEXT, tokens)
    np.testing.assert_allclose(np.asarray(forced.log_probs), log_probs[0].numpy(), atol=1e-5)
    logits, _ = translator.run_with_cache(TEXT, tokens, return_type="logits")
    torch.testing.assert_close(torch.log_softmax(logits, -1), log_probs, atol=1e-5, rtol=0)


def test_the_cache_stacks_accumulates_and_decomposes_the_stream(translator):
    _, cache = translator.run_with_cache(TEXT)
    model, cfg = translator.model, translator.cfg
    pattern = cache.stack("decoder.*.cross_attn.hook_pattern")
    assert pattern.shape[0] == cfg.n_decoder_layers
    torch.testing.assert_close(pattern[1], cache["decoder.1.cross_attn.hook_pattern"])
    torch.testing.assert_close(cache.stack("cross_attn.hook_pattern"), pattern)
    with pytest.raises(ValueError, match="decoder.\\*.hook_resid_post and encoder.\\*.hook_resid_post"):
        cache.stack("hook_resid_post")  # in both stacks
    resid, labels = cache.accumulated_resid("decoder", return_labels=True)
    assert labels == [f"{l}_pre" for l in range(cfg.n_decoder_layers)] + ["final_post"]
    torch.testing.assert_close(resid[-1], cache[f"decoder.{cfg.n_decoder_layers - 1}.hook_resid_post"])
    assert cache.accumulated_resid("encoder", layer=1, incl_mid=True, return_labels=True)[1] == ["0_pre", "0_mid",
                                                                                                "1_pre"]
    for side in ("encoder", "decoder"):
        parts, names = cache.decompose_resid(side, return_labels=True)
        last = cache[f"{side}.{_n(cfg, side) - 1}.hook_resid_post"]
        torch.testing.assert_close(parts.sum(0), last, atol=1e-5, rtol=0)  # the stream is the sum of its parts
        assert names[:2] == ["embed", "pos_embed"] and names[-1] == f"{_n(cfg, side) - 1}_mlp_out"
    # the final norm, applied part by part, then its weight and bias: the normalised stream the generator reads
    parts = cache.apply_ln_to_stack(cache.decompose_resid("decoder"), "decoder")
    norm = model.decoder_final_ln
    torch.testing.assert_close(parts.sum(0) * norm.weight + norm.bias, cache["decoder_final_ln.hook_normalized"],
                               atol=1e-5, rtol=0)
    one = cache.remove_batch_dim()
    assert one["decoder.0.hook_resid_pre"].shape == cache["decoder.0.hook_resid_pre"].shape[1:]
    assert cache.to("cpu")["hook_embed"].device.type == "cpu"


def _n(cfg, side: str) -> int:
    return cfg.n_encoder_layers if side == "encoder" else cfg.n_decoder_layers


def test_a_post_norm_models_stream_is_no_sum_and_says_so(make_model, vocabs):
    from model.inference.translator import Translator

    tr = Translator(make_model(norm_first=False), *vocabs, {})
    _, cache = tr.run_with_cache(TEXT, ["a", "man"])
    with pytest.raises(ValueError, match="pre-norm"):
        cache.decompose_resid()
    assert cache.accumulated_resid().shape[0] == tr.cfg.n_decoder_layers + 1  # the stream itself is still there


def test_grad_keeps_the_cache_in_the_graph(translator):
    log_probs, cache = translator.run_with_cache(TEXT, ["a", "man"], names_filter="decoder.0.hook_resid_mid",
                                                 grad=True)
    mid = cache["decoder.0.hook_resid_mid"]
    assert mid.requires_grad and not mid.is_inference()
    (grad,) = torch.autograd.grad(log_probs[0, 1].max(), mid)
    assert grad.shape == mid.shape and float(grad.abs().sum()) > 0


def test_weights_are_views_with_transformer_lens_shapes(translator):
    cfg, model = translator.cfg, translator.model
    attn = _attention(model, "decoder", 1, "cross")
    d, h, d_head = cfg.d_model, cfg.n_heads, cfg.d_model // cfg.n_heads
    assert attn.W_Q.shape == attn.W_K.shape == attn.W_V.shape == (h, d, d_head) and attn.W_O.shape == (h, d_head, d)
    assert attn.b_Q.shape == (h, d_head) and attn.b_O.shape == (d,)
    assert attn.W_Q.data_ptr() == attn.w_q.weight.data_ptr() and translator.W_U.shape == (d, cfg.tgt_vocab_size)
    _, cache = translator.run_with_cache(TEXT)
    # the head's query, value and output from the weights equal what the pass recorded
    x = cache["decoder.1.hook_resid_mid"]
    normed = _attention_input(model, 1, x)
    q = torch.einsum("bid,hde->bihe", normed, attn.W_Q) + attn.b_Q
    torch.testing.assert_close(q, cache["decoder.1.cross_attn.hook_q"], atol=1e-5, rtol=0)
    z = cache["decoder.1.cross_attn.hook_z"]
    out = torch.einsum("bihe,hed->bid", z, attn.W_O) + attn.b_O
    torch.testing.assert_close(out, cache["decoder.1.hook_cross_attn_out"], atol=1e-5, rtol=0)


def _attention(model, side: str, layer: int, kind: str):
    stack = getattr(model, side, None) if isinstance(getattr(model, side, None), torch.nn.ModuleList) else getattr(
        model, f"{side}_layers")
    block = stack[layer]
    return block.cross_attn if kind == "cross" else getattr(block, "attn", None) or block.self_attn


def _attention_input(model, layer: int, x):
    """The cross-attention's query input: the pre-norm block's second norm of the stream."""
    stack = model.decoder if isinstance(getattr(model, "decoder", None), torch.nn.ModuleList) else model.decoder_layers
    return stack[layer].sub[1].norm(x)


def test_a_batch_is_padded_and_each_row_equals_its_sentence_alone(translator):
    both, cache = translator.run_with_cache([TEXT, OTHER])
    assert cache.src_lengths is not None and len(cache.src_tokens) == 2
    assert cache.src_padding_mask.shape == (2, max(cache.src_lengths))
    for row, text in enumerate((TEXT, OTHER)):
        alone, _ = translator.run_with_cache(text)
        n = cache.tgt_lengths[row]
        assert n == alone.shape[1]
        torch.testing.assert_close(both[row, :n], alone[0], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="2 sentences but 1 targets"):
        translator.run_with_cache([TEXT, OTHER], [["a"]])


@pytest.mark.parametrize("names_filter", [lambda n: n.endswith("hook_pattern"), "decoder.1.cross_attn.hook_q",
                                          lambda n: n.endswith(("hook_z", "hook_v", "hook_resid_post"))])
def test_a_filtered_cache_holds_no_more_memory_than_its_tensors_need(translator, names_filter):
    """A cached tensor that were a view of a larger one would keep the larger one alive."""
    _, cache = translator.run_with_cache(TEXT, names_filter=names_filter)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in cache.values()}
    needed = sum(t.numel() * t.element_size() for t in cache.values())
    assert len(cache) and sum(storages.values()) <= needed


def test_the_trace_and_the_cache_are_one_vocabulary(translator):
    from model.nn.transformer import hook_names

    tokens = translator.translate(TEXT).raw_tokens
    log_probs, cache = translator.run_with_cache(TEXT, tokens)
    trace = cache.to_trace(log_probs)
    same = translator.teacher_forced(TEXT, tokens)  # the app's record of the same pass
    np.testing.assert_allclose(trace.probs("cross"), same.probs("cross"), atol=1e-6)
    held = 0
    for name in hook_names(translator.cfg):
        try:
            got = trace.point(name)
        except KeyError:
            continue
        held += 1
        want = cache[name][0].numpy()
        if name.endswith("hook_attn_scores"):
            np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
            got, want = np.where(np.isfinite(got), got, 0), np.where(np.isfinite(want), want, 0)
        np.testing.assert_allclose(got, want, atol=1e-6, err_msg=name)
    assert held >= 7 * 3 * translator.cfg.n_encoder_layers  # every attention point of every layer, at least
    with pytest.raises(KeyError, match="no point this trace holds"):
        trace.point("decoder.0.mlp.hook_post")
