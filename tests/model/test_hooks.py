"""The hook points (model/nn/hooks.py): every name, its shape, hooks that replace or only look, their order, the
errors, the names filter, the Translator's verbs, and that a hook of one call never reaches another call on the
same model (one cached model serves every session of the server, from several threads).

Shape letters: b batch, s source positions, t decoder positions, h heads (docs/hooks.md).
"""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from model.inference.translator import Translator
from model.nn.hooks import EXPLICIT
from model.nn.transformer import hook_names

B, S, T = 2, 6, 4  # different sizes, so that a swapped axis shows


def _batch(cfg, pad_last: int = 2):
    """(src (B, S), tgt (B, T)): random ids, row 1 of the source padded at its last `pad_last` positions."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, cfg.src_vocab_size, (B, S), generator=g)
    tgt = torch.randint(4, cfg.tgt_vocab_size, (B, T), generator=g)
    if pad_last:
        src[1, -pad_last:] = cfg.pad_idx
    return src, tgt


def _expected_shape(name: str, cfg) -> tuple[int, ...]:
    """The shape docs/hooks.md gives a point, worked out here on its own."""
    pos = S if name.startswith(("encoder", "hook_")) else T
    keys = S if ".cross_attn." in name else pos
    last = name.rsplit(".", 1)[-1]
    if last in ("hook_q", "hook_z"):
        return (B, pos, cfg.n_heads, cfg.d_k)
    if last in ("hook_k", "hook_v"):
        return (B, keys, cfg.n_heads, cfg.d_k)
    if last in EXPLICIT:
        return (B, cfg.n_heads, pos, keys)
    if ".mlp." in name:
        return (B, pos, cfg.d_ff)
    return (B, pos, cfg.d_model)


@pytest.mark.parametrize("norm_first", [True, False])
def test_every_point_reaches_the_cache_with_its_shape(make_model, norm_first):
    model = make_model(norm_first=norm_first)
    src, tgt = _batch(model.cfg)
    with torch.no_grad():
        _, cache = model.run_with_cache(src, tgt)
    names = hook_names(model.cfg)
    assert list(cache) == names  # every point, in the order a pass reaches it
    assert ("decoder_final_ln.hook_normalized" in names) == norm_first
    for name in names:
        assert tuple(cache[name].shape) == _expected_shape(name, model.cfg), name


@pytest.mark.parametrize("norm_first", [True, False])
def test_cache_pass_equals_fused_pass_and_pattern_is_softmax_of_scores(make_model, norm_first):
    model = make_model(norm_first=norm_first)
    src, tgt = _batch(model.cfg)
    with torch.no_grad():
        fused = model(src, tgt)  # no hooks: scaled_dot_product_attention
        log_probs, cache = model.run_with_cache(src, tgt)  # attention written out
    assert torch.allclose(log_probs, fused, atol=1e-5)
    assert torch.isinf(cache["encoder.0.attn.hook_attn_scores"][1, :, :, -1]).all()  # the padded key is hidden
    for name in (n for n in cache if n.endswith(".hook_pattern")):
        scores = cache[name.replace("hook_pattern", "hook_attn_scores")]
        assert torch.allclose(cache[name], torch.softmax(scores, dim=-1).nan_to_num(0.0), atol=1e-6), name
        assert torch.allclose(cache[name].sum(-1), torch.ones(()), atol=1e-5), name


def test_a_replacement_changes_what_follows_and_none_changes_nothing(tiny_model):
    src, tgt = _batch(tiny_model.cfg)
    seen = []

    def look(x, name):
        seen.append((name, tuple(x.shape)))

    with torch.no_grad():
        plain = tiny_model(src, tgt)
        halved = tiny_model.run_with_hooks(src, tgt, [("encoder.0.hook_resid_post", lambda x, n: 0.5 * x)])
        looked = tiny_model.run_with_hooks(src, tgt, [("encoder.0.hook_resid_post", look)])
        looked_pattern = tiny_model.run_with_hooks(src, tgt, [("decoder.1.cross_attn.hook_pattern", look)])
    assert (halved - plain).abs().max() > 1e-3
    assert torch.equal(looked, plain)  # a hook off the attention's inside keeps the fused kernel
    assert torch.allclose(looked_pattern, plain, atol=1e-5)
    cfg = tiny_model.cfg
    assert seen == [("encoder.0.hook_resid_post", (B, S, cfg.d_model)),
                    ("decoder.1.cross_attn.hook_pattern", (B, cfg.n_heads, T, S))]


def test_hooks_run_in_order_and_the_cache_keeps_the_replaced_value(tiny_model):
    src, tgt = _batch(tiny_model.cfg)
    name = "decoder.1.hook_resid_mid"
    seen = []

    def double(x, n):
        seen.append(x.clone())
        return 2 * x

    with torch.no_grad():
        _, clean = tiny_model.run_with_cache(src, tgt, names_filter=name)
    _, cache = tiny_model.run_with_cache(src, tgt, names_filter=name, fwd_hooks=[(name, lambda x, n: x + 1.0),
                                                                               (name, double)])
    assert torch.allclose(seen[0], clean[name] + 1.0)  # the second hook sees the first one's result
    assert torch.allclose(cache[name], 2 * (clean[name] + 1.0))
    assert not cache[name].requires_grad  # detached, although this pass ran with autograd on


def test_a_replacement_of_another_shape_is_refused(tiny_model):
    src, tgt = _batch(tiny_model.cfg)
    with pytest.raises(ValueError, match=r"decoder\.0\.attn\.hook_z returned shape"):
        tiny_model.run_with_hooks(src, tgt, [("decoder.0.attn.hook_z", lambda z, n: z[:, :, :1])])


def test_a_misspelt_name_is_refused_with_the_close_match(tiny_model, translator):
    src, tgt = _batch(tiny_model.cfg)
    typo = [("encoder.0.attn.hook_patern", lambda x, n: None)]
    calls = (lambda: tiny_model.run_with_hooks(src, tgt, typo),
             lambda: tiny_model.run_with_cache(src, tgt, fwd_hooks=typo),
             lambda: translator.translate("Ein Mann fährt Fahrrad.", fwd_hooks=typo),
             lambda: translator.run_with_cache("Ein Mann fährt Fahrrad.", fwd_hooks=typo))
    for call in calls:
        with pytest.raises(ValueError, match=r"did you mean .*encoder\.0\.attn\.hook_pattern"):
            call()


@pytest.mark.parametrize("names_filter", [
    "decoder.0.cross_attn.hook_pattern",
    ["encoder.1.hook_resid_post", "decoder.hook_embed", "decoder.1.mlp.hook_post"],
    lambda n: n.endswith("hook_z"),
], ids=["name", "list", "predicate"])
def test_names_filter(tiny_model, names_filter):
    src, tgt = _batch(tiny_model.cfg)
    with torch.no_grad():
        _, cache = tiny_model.run_with_cache(src, tgt, names_filter=names_filter)
    names = hook_names(tiny_model.cfg)
    if isinstance(names_filter, str):
        wanted = {names_filter}
    elif callable(names_filter):
        wanted = {n for n in names if names_filter(n)}
    else:
        wanted = set(names_filter)
    assert wanted and set(cache) == wanted


def test_a_hooked_call_never_reaches_a_plain_call_on_another_thread(tiny_model):
    """Two threads on one model at once, in lock step: one changes every activation, the other has no hooks."""
    model, rounds = tiny_model, 150
    src, tgt = _batch(model.cfg)
    every = [(lambda n: True, lambda x, n: x + 1.0)]
    with torch.no_grad():
        plain_before = model(src, tgt)
        hooked_before = model.run_with_hooks(src, tgt, every)
    assert (hooked_before - plain_before).abs().max() > 1e-2
    barrier = threading.Barrier(2, timeout=60)
    wrong: dict[str, list[int]] = {"plain": [], "hooked": []}
    errors: list[BaseException] = []

    def loop(kind: str, run, expected: torch.Tensor) -> None:
        try:
            with torch.no_grad():  # thread-local, like inference mode
                for i in range(rounds):
                    barrier.wait()
                    if not torch.equal(run(), expected):
                        wrong[kind].append(i)
        except BaseException as e:  # noqa: BLE001 - reported below, and the partner must not wait for ever
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=loop, args=("plain", lambda: model(src, tgt), plain_before)),
               threading.Thread(target=loop, args=("hooked", lambda: model.run_with_hooks(src, tgt, every),
                                                   hooked_before))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert wrong == {"plain": [], "hooked": []}
    for module in model.modules():
        assert not (module._forward_hooks or module._forward_pre_hooks), module
    with torch.no_grad():
        assert torch.equal(model(src, tgt), plain_before)


def _zero_head(head: int):
    def hook(z, name):  # (b, pos, h, d_head)
        z = z.clone()
        z[:, :, head] = 0.0
        return z
    return hook


@pytest.mark.parametrize("kind, layer, head", [("enc_self", 0, 1), ("dec_self", 1, 3), ("cross", 1, 2)])
def test_translate_with_a_zeroed_head_equals_off_heads(translator, kind, layer, head):
    from model.nn.hooks import attn_name

    text = "Zwei Hunde spielen im Schnee."
    fwd = [(attn_name(kind, layer, "hook_z"), _zero_head(head))]
    off = [(kind, layer, head)]
    by_hook, by_gate = translator.translate(text, fwd_hooks=fwd), translator.translate(text, off_heads=off)
    assert by_hook.raw_tokens == by_gate.raw_tokens
    by_hook, by_gate = translator.trace(text, fwd_hooks=fwd), translator.trace(text, off_heads=off)
    assert by_hook.raw_tokens == by_gate.raw_tokens
    assert torch.allclose(torch.as_tensor(by_hook.trace.log_probs), torch.as_tensor(by_gate.trace.log_probs),
                          atol=1e-6)
    plain = translator.trace(text)
    if plain.raw_tokens == by_gate.raw_tokens:  # the same words, but the head's output still moved the scores
        assert (torch.as_tensor(plain.trace.log_probs) - torch.as_tensor(by_gate.trace.log_probs)).abs().max() > 1e-4


def test_translator_run_with_cache_scores_the_greedy_translation(translator):
    text = "Ein Mann fährt Fahrrad."
    greedy = translator.translate(text)
    assert greedy.finished  # the trained tiny model ends its sentences
    log_probs, cache = translator.run_with_cache(text)
    v = translator.tgt_vocab
    assert log_probs.shape == (1, len(greedy.raw_tokens) + 1, len(v.itos))
    assert cache["decoder.0.hook_resid_pre"].shape[1] == len(greedy.raw_tokens) + 1
    banned = torch.tensor([v.bos_idx, v.pad_idx])  # never generated (model/inference/decode.py)
    chosen = log_probs[0].index_fill(-1, banned, float("-inf")).argmax(-1)
    assert chosen.tolist() == v.encode(greedy.raw_tokens) + [v.eos_idx]  # teacher forcing on the greedy choices
    hooked = translator.run_with_hooks(text, fwd_hooks=[("decoder.1.hook_resid_post", lambda x, n: 0.0 * x)])
    assert hooked.shape == log_probs.shape and not torch.allclose(hooked, log_probs)
    target = greedy.raw_tokens[:2]  # rows score the target, then </s>; a final </s> is not added twice
    assert translator.run_with_cache(text, target, names_filter="hook_embed")[0].shape[1] == len(target) + 1
    assert translator.run_with_cache(text, target + [v.token("eos")])[0].shape[1] == len(target) + 1
    assert translator.run_with_cache(text, target, eos=False)[0].shape[1] == len(target)


def test_decoding_hooks_see_the_new_position_and_cross_keys_once(translator):
    calls: dict[str, list[tuple[int, ...]]] = {"decoder.0.hook_resid_pre": [], "decoder.1.cross_attn.hook_k": []}

    def record(x, name):
        calls[name].append(tuple(x.shape))

    greedy = translator.translate("Eine Frau liest ein Buch.", fwd_hooks=[(n, record) for n in calls])
    steps = len(greedy.raw_tokens) + int(greedy.finished)
    d = translator.cfg.d_model
    assert calls["decoder.0.hook_resid_pre"] == [(1, 1, d)] * steps
    assert len(calls["decoder.1.cross_attn.hook_k"]) == 1  # the memory's keys are projected once


@pytest.mark.parametrize("norm_first", [True, False])
def test_encode_from_and_decode_from_a_cached_stream_give_the_full_pass(make_model, norm_first):
    from model.nn.transformer import make_src_mask, make_tgt_mask

    model = make_model(norm_first=norm_first)
    cfg = model.cfg
    src, tgt = _batch(cfg)
    src_mask, tgt_mask = make_src_mask(src, cfg.pad_idx), make_tgt_mask(tgt, cfg.pad_idx)
    with torch.no_grad():
        _, cache = model.run_with_cache(src, tgt, lambda n: n.endswith("hook_resid_pre"))
        memory = model.encode(src, src_mask)
        states = model.decode(memory, src_mask, tgt, tgt_mask)
        for l in range(cfg.n_encoder_layers):
            again = model.encode_from(cache[f"encoder.{l}.hook_resid_pre"], src_mask, l)
            assert torch.allclose(again, memory, atol=1e-6), l
        for l in range(cfg.n_decoder_layers):
            again = model.decode_from(cache[f"decoder.{l}.hook_resid_pre"], memory, src_mask, tgt_mask, l)
            assert torch.allclose(again, states, atol=1e-6), l


def _toy():
    from model.nn.transformer import EncoderDecoder
    from model.training.toy import ToyTranslator, toy_config

    torch.manual_seed(0)
    return ToyTranslator(EncoderDecoder(toy_config()).eval(), "reverse")


ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"pieces": ROOT / "checkpoints" / "multi30k-de-en", "words": ROOT / "checkpoints" / "multi30k-de-en-words",
           "marian": ROOT / "tests" / "data" / "reference" / "tiny-marian"}


@pytest.mark.parametrize("name, twin", [("pieces", False), ("words", False), ("words", True), ("marian", False),
                                        ("toy", False), ("toy", True)])
def test_the_api_on_every_kind_of_model(name, twin):
    """The shipped piece and word models, an untrained twin, a toy and an imported Marian model: the Translator's
    run_with_cache, run_with_hooks, translate and trace with hooks."""
    tr = _toy() if name == "toy" else Translator.from_checkpoint(FOLDERS[name], draft=False)
    tr = tr.untrained_twin() if twin else tr
    text = "3 1 4 1 5" if name == "toy" else "Ein Hund läuft im Schnee."
    cfg = tr.cfg
    log_probs, cache = tr.run_with_cache(text)
    out = tr.translate(text)
    assert log_probs.shape == (1, len(out.raw_tokens) + 1, cfg.tgt_vocab_size)  # the translation, then </s>
    assert list(cache) == hook_names(cfg)
    torch.testing.assert_close(tr.run_with_hooks(text, fwd_hooks=[(lambda n: True, lambda x, n: None)]), log_probs,
                               atol=1e-5, rtol=1e-5)  # hooks that only look change nothing
    layer, head = cfg.n_decoder_layers - 1, 0
    zero = [(f"decoder.{layer}.cross_attn.hook_z", lambda z, n: torch.cat([z[:, :, :1] * 0, z[:, :, 1:]], 2))]
    assert tr.translate(text, fwd_hooks=zero).text == tr.translate(text, off_heads=[("cross", layer, head)]).text
    hooked = tr.run_with_hooks(text, fwd_hooks=zero)
    assert (hooked - log_probs).abs().max() > 1e-6  # the head mattered to some position
    traced = tr.trace(text, fwd_hooks=zero)
    assert traced.text == tr.translate(text, fwd_hooks=zero).text
    assert float(abs(traced.trace.attn["cross"][layer]["out"][head]).max()) == 0.0  # the trace shows it off
