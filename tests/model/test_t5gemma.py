"""T5Gemma in our network, against transformers' own T5GemmaForConditionalGeneration (eager attention), on a tiny
random model with grouped key/value heads, alternating sliding (window 4) and full layers, both soft-caps and a
query_pre_attn_scalar that is not head_dim (tests/t5gemma_support.py), and a Gemma tokenizer trained on the fly.

On 20 sentences: the same token ids as GemmaTokenizer (<bos> first, no end token), greedy translations identical to
generate(num_beams=1), logits within 1e-4 and the three attention kinds within 1e-5 of output_attentions; the
incremental decoding (greedy and beam, with the key/value cache) is the full pass's; the new hook points and the
trace's keys; the fused and written-out attention agree on a rotary, grouped, windowed model that does not cap.
"""
from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sentencepiece")
transformers = pytest.importorskip("transformers")

from model.inference.decode import decode_step, search  # noqa: E402
from model.inference.translator import Translator  # noqa: E402
from model.io.import_hf import ImportRefused, import_hf, main  # noqa: E402
from model.nn.config import ModelConfig  # noqa: E402
from model.nn.hooks import Hooks, attn_name  # noqa: E402
from model.nn.trace import for_trace, patterns  # noqa: E402
from model.nn.transformer import EncoderDecoder, hook_names, make_src_mask, make_tgt_mask  # noqa: E402
from model.records import kv_head  # noqa: E402
from tests.hf_support import DE, assert_same_greedy, sentences  # noqa: E402
from tests.t5gemma_support import WINDOW, build_t5gemma  # noqa: E402

SENTENCES = sentences(DE, 18, 7) + ["Der Hund läuft im Park mit einem roten Ball.", "Ein Zebra frisst Äpfel!"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch.set_num_threads(1)
    return build_t5gemma(tmp_path_factory.mktemp("t5gemma") / "hf")


@pytest.fixture(scope="module")
def imported(saved, tmp_path_factory):
    """(the original with eager attention, its tokenizer, our Translator, the folder written)."""
    out = tmp_path_factory.mktemp("t5gemma-ours") / "ours"
    import_hf(str(saved), out)
    hf = transformers.T5GemmaForConditionalGeneration.from_pretrained(str(saved), attn_implementation="eager").eval()
    return hf, transformers.AutoTokenizer.from_pretrained(str(saved)), Translator.from_checkpoint(out), out


def test_the_config_is_t5gemmas(imported):
    _, _, tr, out = imported
    cfg = tr.cfg
    assert (cfg.positions, cfg.norm, cfg.sublayer_post_norm, cfg.n_kv_heads, cfg.rope_base) == (
        "rotary", "gemma_rms", True, 2, 1000.0)
    assert cfg.windows("encoder") == cfg.windows("decoder") == (WINDOW, 0)
    assert (cfg.attn_softcap, cfg.final_softcap, cfg.query_pre_attn_scalar) == (5.0, 3.0, 12.0)
    assert (cfg.src_bos, cfg.src_eos, cfg.scale_embedding, cfg.ff_gated, cfg.bias) == (True, False, True, True, False)
    card = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["imported"]
    assert card["family"] == "t5gemma" and card["class"] == "T5GemmaForConditionalGeneration"
    assert card["agreement_max_abs_log_prob"] < 1e-4
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_token_ids_equal_gemmas_tokenizer(imported):
    _, tok, tr, _ = imported
    for text in SENTENCES + ["Der Hund € läuft ☃.", "ÄÖÜ ß é 123 4.5"]:  # byte fallback and split digits too
        assert tr.prepare(text).ids == tok(text)["input_ids"], text
    source = tr.prepare("Der Hund läuft.")
    assert source.axis_tokens[0] == "<bos>" and source.axis_tokens[-1] != "<eos>"
    assert len(source.axis_tokens) == len(source.ids)


def _generate(hf, tr, source, limit):
    """generate(num_beams=1) as tests/model/test_import_hf.py runs it: <pad> and the start token banned, no forced
    end token at the length limit."""
    banned = sorted({tr.cfg.pad_idx, tr.cfg.decoder_start_idx} - {tr.cfg.eos_idx})
    with torch.inference_mode():
        return hf.generate(torch.tensor([source.ids]), num_beams=1, do_sample=False, max_new_tokens=limit,
                           bad_words_ids=[[b] for b in banned], forced_eos_token_id=None)[0].tolist()


def test_greedy_translations_equal_generate(imported):
    hf, _, tr, _ = imported
    distinct, longest = set(), 0
    for text in SENTENCES:
        source = tr.prepare(text)
        ours = tr.translate(text)
        seq = _generate(hf, tr, source, tr.max_steps(source, None))
        assert_same_greedy(tr, ours, seq, text)
        distinct.update(ours.raw_tokens)
        longest = max(longest, len(ours.raw_tokens))
    assert len(distinct) >= 4 and longest > 2 * WINDOW  # varied, and long enough for the decoder's window to cut


def test_logits_and_every_attention_equal_the_originals(imported):
    hf, _, tr, _ = imported
    cut = 0
    for text in SENTENCES:
        source = tr.prepare(text)
        tgt = [tr.cfg.decoder_start_idx] + tr.tgt_vocab.encode(tr.translate(text).raw_tokens)
        with torch.inference_mode():
            out = hf(input_ids=torch.tensor([source.ids]), decoder_input_ids=torch.tensor([tgt]),
                     output_attentions=True)
            logits, cache = tr.model.run_with_cache(
                torch.tensor([source.ids]), torch.tensor([tgt]), lambda n: patterns(n) or "attn_scores" in n,
                return_type="logits")
        assert (logits - out.logits).abs().max() < 1e-4, text
        for kind, maps in (("enc_self", out.encoder_attentions), ("dec_self", out.decoder_attentions),
                           ("cross", out.cross_attentions)):
            for layer, theirs in enumerate(maps):
                assert (cache[attn_name(kind, layer, "hook_pattern")] - theirs).abs().max() < 1e-5, (kind, text)
        hidden = ~torch.isfinite(cache["encoder.0.attn.hook_attn_scores"])  # the local layer's window
        assert not (~torch.isfinite(cache["encoder.1.attn.hook_attn_scores"])).any()  # the full layer hides none
        cut += int(hidden.any())
    assert cut >= 15  # most sentences are longer than 2·WINDOW + 1 tokens: the window cuts


def test_the_incremental_decoding_is_the_full_pass(imported):
    """Each greedy step with the key/value cache (rotary angles from the cached length, windows over the cached
    keys) equals the teacher-forced pass's row."""
    _, _, tr, _ = imported
    model = tr.model
    source = tr.prepare(SENTENCES[-2])
    tgt = torch.tensor([[tr.cfg.decoder_start_idx] + tr.tgt_vocab.encode(tr.translate(SENTENCES[-2]).raw_tokens)])
    assert tgt.shape[1] > WINDOW + 2
    src = torch.tensor([source.ids])
    with torch.inference_mode():
        full = model(src, tgt)
        src_mask = make_src_mask(src, tr.cfg.pad_idx)
        memory, cache = model.encode(src, src_mask), model.new_cache()
        for i in range(tgt.shape[1]):
            step = decode_step(model, memory, src_mask, tgt[:, i : i + 1], cache)[0]
            torch.testing.assert_close(step, full[0, i], atol=1e-5, rtol=1e-5)
        assert cache["layers"][0]["self"]["k"].shape[1] == tr.cfg.n_kv_heads  # the cache keeps the kv heads


class FullPasses(torch.nn.Module):
    """The model without a key/value cache: every step runs the decoder over the whole prefix again. The prefix and
    the memory ride in the cache's place, so that beam search reorders them with the beams (reorder_cache)."""

    def __init__(self, model: EncoderDecoder):
        super().__init__()
        self.model, self.cfg, self.generator = model, model.cfg, model.generator

    def encode(self, *args):
        return self.model.encode(*args)

    def new_cache(self) -> dict:
        return {"len": 0, "layers": [{"self": {}, "cross": {}}]}

    def decode(self, memory, src_mask, tgt, tgt_mask, hooks=None, cache=None):
        own, cross = cache["layers"][0]["self"], cache["layers"][0]["cross"]
        ys = tgt if "k" not in own else torch.cat([own["k"][:, 0, :, 0].long(), tgt], dim=1)  # (b, n)
        own["k"] = own["v"] = ys.float()[:, None, :, None]
        cross.setdefault("k", memory)  # the first step's memory, one row per beam from then on
        cross["v"] = cross["k"]
        out = self.model.decode(cross["k"], src_mask, ys, make_tgt_mask(ys, self.cfg.pad_idx), hooks)
        return out[:, -tgt.shape[1]:]


@pytest.mark.parametrize("beam", [1, 4])
def test_beam_search_with_the_cache_is_beam_search_over_full_passes(imported, beam):
    """A batch of sentences (padded, beams reordered), and Translator.translate one by one."""
    _, _, tr, _ = imported
    v, alpha = tr.tgt_vocab, 0.6 if beam > 1 else 0.0
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(tr.prepare(t).ids) for t in SENTENCES[:6]],
                                          batch_first=True, padding_value=tr.cfg.pad_idx)
    args = (src, v.bos_idx, v.eos_idx, 24, beam, alpha)
    cached, full = search(tr.model, *args), search(FullPasses(tr.model), *args)
    assert [(d.ids, d.finished) for d in cached] == [(d.ids, d.finished) for d in full]
    assert max(len(d.ids) for d in cached) > WINDOW + 2
    for text in SENTENCES[:3]:
        source = tr.prepare(text)
        want = search(FullPasses(tr.model), torch.tensor([source.ids]), v.bos_idx, v.eos_idx,
                      tr.max_steps(source, None), beam, alpha)[0]
        got = tr.translate(text, beam=beam)
        assert (v.encode(got.raw_tokens), got.finished) == (want.ids, want.finished), text


def test_the_new_hook_points_and_the_trace(imported):
    _, _, tr, _ = imported
    cfg = tr.cfg
    text = SENTENCES[-2]
    _, cache = tr.run_with_cache(text)
    s, t = cache["encoder.0.attn.hook_q"].shape[1], cache["decoder.0.attn.hook_q"].shape[1]
    h, kv, d = cfg.n_heads, cfg.n_kv_heads, cfg.d_k
    assert cache["encoder.0.attn.hook_rot_q"].shape == (1, s, h, d)
    assert cache["encoder.0.attn.hook_rot_k"].shape == cache["encoder.0.attn.hook_k"].shape == (1, s, kv, d)
    assert cache["decoder.1.cross_attn.hook_v"].shape == (1, s, kv, d)
    assert cache["decoder.0.attn.hook_softcapped_scores"].shape == (1, h, t, t)
    assert cache["decoder.0.cross_attn.hook_softcapped_scores"].abs().max() < cfg.attn_softcap
    assert "decoder.0.cross_attn.hook_rot_q" not in cache  # cross-attention is not rotated
    assert list(cache) == hook_names(cfg)
    trace = tr.trace(text).trace
    enc = trace.attn["enc_self"][0]
    assert {"rot_q", "rot_k", "capped"} <= set(enc) and "rot_q" not in trace.attn["cross"][0]
    assert enc["k"].shape == (kv, s, d) and enc["rot_q"].shape == (h, s, d)
    assert [kv_head(cfg, i) for i in range(h)] == [0, 0, 1, 1]
    head = 3  # its scores are its rotated query against its key/value head's rotated key
    q, k = torch.tensor(enc["rot_q"][head]), torch.tensor(enc["rot_k"][kv_head(cfg, head)])
    torch.testing.assert_close(torch.tensor(enc["scores"][head]), q @ k.T * cfg.query_pre_attn_scalar ** -0.5)
    assert trace.point("encoder.0.attn.hook_rot_k").shape == (s, kv, d)
    assert for_trace("decoder.1.attn.hook_softcapped_scores")


def test_the_rotation_is_transformers(imported):
    from transformers.models.t5gemma import modeling_t5gemma as T

    hf, _, tr, _ = imported
    ids = torch.tensor([tr.prepare(SENTENCES[0]).ids])
    _, cache = tr.model.run_with_cache(ids, ids[:, :3], names_filter=lambda n: n.startswith("encoder.1.attn.hook"))
    q, k = (cache[f"encoder.1.attn.hook_{x}"].transpose(1, 2) for x in ("q", "k"))  # (b, heads, s, d)
    rope = hf.model.encoder.rotary_emb
    cos, sin = rope(q, torch.arange(q.shape[2])[None])
    want_q, want_k = T.apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.equal(cache["encoder.1.attn.hook_rot_q"], want_q.transpose(1, 2))
    assert torch.equal(cache["encoder.1.attn.hook_rot_k"], want_k.transpose(1, 2))


def test_gemmas_norm_is_computed_in_float32_as_transformers():
    from transformers.models.t5gemma import modeling_t5gemma as T

    from model.nn.layers import make_norm

    torch.manual_seed(0)
    ours, theirs = make_norm(16, "gemma_rms", 1e-6), T.T5GemmaRMSNorm(16, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(3, 5, 16) * 4).to(dtype)
        assert torch.equal(ours(x), theirs(x)) and ours(x).dtype == dtype


GQA_ROTARY = dict(positions="rotary", n_kv_heads=2, encoder_windows="3,0", decoder_windows="0,3",
                  sublayer_post_norm=True, norm="gemma_rms", query_pre_attn_scalar=6.0, ff_gated=True, bias=False,
                  activation="gelu_new")


def test_fused_and_written_out_attention_agree_without_a_cap(make_model, encoded_pairs):
    """A rotary, grouped, windowed model that does not cap keeps the fused kernel in a plain pass."""
    model = make_model(**GQA_ROTARY)
    pairs = encoded_pairs[:3]
    n_src, n_tgt = max(len(p[0]) for p in pairs), max(len(p[1]) for p in pairs) + 1
    src = torch.tensor([p[0] + [1] * (n_src - len(p[0])) for p in pairs])
    tgt = torch.tensor([[2] + p[1] + [1] * (n_tgt - 1 - len(p[1])) for p in pairs])
    with torch.inference_mode():
        fused, cache = model(src, tgt), {}
        written = model(src, tgt, Hooks(cache=cache))
    torch.testing.assert_close(written, fused, atol=1e-5, rtol=1e-5)
    assert "encoder.0.attn.hook_rot_q" in cache and not any("softcapped" in n for n in cache)
    assert list(cache) == hook_names(model.cfg)


@pytest.mark.parametrize("field, value, words", [
    ("encoder_windows", "4", ["encoder_windows", "3 windows"]),  # one per layer: 3 by default
    ("decoder_windows", "4,x,0", ["decoder_windows", "integers"]),
    ("n_kv_heads", 3, ["n_kv_heads"]),
])
def test_the_config_refuses_what_it_cannot_describe(field, value, words):
    with pytest.raises(ValueError) as err:
        ModelConfig(src_vocab_size=10, tgt_vocab_size=10, **{field: value})
    assert all(w in str(err.value) for w in words)
    with pytest.raises(ValueError, match="n_kv_heads"):  # a version-4 file cannot hold a version-5 field
        ModelConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10, "format_version": 4, "n_kv_heads": 2})


def _edit(saved, dst, side_changes: dict):
    shutil.copytree(saved, dst)
    hf = json.loads((dst / "config.json").read_text(encoding="utf-8"))
    for key, value in side_changes.items():
        side, _, field = key.partition(".")
        hf[side][field] = value
    (dst / "config.json").write_text(json.dumps(hf), encoding="utf-8")
    return dst


@pytest.mark.parametrize("changes, words", [
    ({"decoder.num_attention_heads": 8}, ["encoder.num_attention_heads", "decoder.num_attention_heads"]),
    ({"encoder.attention_bias": True}, ["encoder.attention_bias"]),
    ({"decoder.rope_parameters": {"rope_type": "linear", "rope_theta": 1000.0, "factor": 2.0}}, ["rope_type"]),
    ({"encoder.layer_types": ["chunked_attention", "full_attention"]}, ["encoder.layer_types"]),
    ({"decoder.hidden_activation": "tanh"}, ["hidden_activation"]),
])
def test_what_cannot_be_run_is_one_line_naming_the_field(saved, tmp_path, capsys, changes, words):
    src = _edit(saved, tmp_path / "edited", changes)
    assert main([str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words) and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_folder_without_gemmas_sentencepiece_model_is_refused(saved, tmp_path):
    src = tmp_path / "partial"
    shutil.copytree(saved, src)
    (src / "tokenizer.model").unlink()
    with pytest.raises(ImportRefused, match="SentencePiece model"):
        import_hf(str(src), tmp_path / "out")


def test_the_int8_draft_guesses_the_same_traces(imported):
    from model.inference.draft import quantization_available

    if not quantization_available():
        pytest.skip("this torch has no int8 engine")
    _, _, tr, out = imported
    drafted = Translator.from_checkpoint(out, draft=True)
    assert drafted.draft is not None and drafted.draft.generator.softcap == tr.cfg.final_softcap
    for text in SENTENCES[:5]:
        assert drafted.trace(text).raw_tokens == tr.trace(text).raw_tokens, text
