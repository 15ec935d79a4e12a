"""AppTest regression tests: the header shows what the figures show, every choice is in the URL,
claims are computed from the page's numbers, and pages say which decoding they draw."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.app_support import md_tables, run_app, spec, url, visible_text, write_split
from tests.tiny_checkpoint import GERMAN

SENTENCE = GERMAN[3]  # "Ein Hund läuft im Schnee."


def y_ticks(chart) -> list[str]:
    """Tick labels of the first y axis of a chart (the query tokens of an attention map)."""
    layout = spec(chart)["layout"]
    return list(layout["yaxis"]["ticktext"])


def header(at) -> str:
    """The '### EN translation' line above every view, without its Markdown escapes."""
    line = next(m.value for m in at.markdown if m.value.startswith("### :gray[EN]"))
    return line.replace("### :gray[EN] ", "").replace("\\", "")


def unescape(tokens: list[str]) -> list[str]:
    return [t.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") for t in tokens]


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_header_and_figures_show_the_same_decoding(checkpoints, demo_translator, decoding):
    at = run_app(view="Attention", kind="cross", text=SENTENCE, decoding=decoding, beam=3)
    assert not at.exception
    expected = (demo_translator.translate(SENTENCE, beam=3) if decoding == "beam"
                else demo_translator.translate(SENTENCE))
    assert header(at) == expected.text
    assert unescape(y_ticks(at.get("plotly_chart")[1]))[1:] == expected.raw_tokens  # rows: <bos> + the output
    label = "beam search (beam 3)" if decoding == "beam" else "greedy decoding"
    assert label in captions(at)


def test_forced_prefix_shows_in_the_header_and_every_figure(checkpoints, demo_translator):
    at = run_app(view="Attention", kind="dec_self", text=SENTENCE, prefix="A dog")
    forced = demo_translator.trace(SENTENCE, prefix=["A", "dog"])
    assert header(at) == forced.text
    assert unescape(y_ticks(at.get("plotly_chart")[1]))[:3] == ["<bos>", "A", "dog"]
    assert "your forced first 2 token(s)" in captions(at)
    at.sidebar.text_area(key="text").set_value(GERMAN[0]).run()  # a new sentence drops the forcing
    assert "prefix" not in at.query_params and not at.exception


EVERYTHING = dict(view="Decoding", kind="enc_self", layer=2, head=3, rescale=1, off="enc_self-2-1,cross-1-2",
                  pad_on=0, pad_layer=2, pad_head=4, causal_layer=2, causal_head=2, prefix="A dog", dec_step=2,
                  dec_layer=1, dec_head=3, emb_side="tgt", pe_positions=60, pe_dims="0,3", pe_ref=7, decoding="beam",
                  beam=4, max_len=30, fig_format="svg")


@pytest.mark.parametrize("view", ["Decoding", "Masks", "Attention", "Embeddings", "Positional encoding"])
def test_a_link_with_every_choice_round_trips(checkpoints, view):
    params = {**EVERYTHING, "view": view, "text": SENTENCE}
    at = run_app(**params)
    assert not at.exception, [e.value for e in at.exception]
    got = url(at)
    for key, value in params.items():
        assert got.get(key) == str(value), (key, got.get(key), value)


def test_url_keys_drive_the_widgets(checkpoints):
    at = run_app(view="Masks", text=SENTENCE, pad_layer=2, pad_head=3, causal_layer=2, causal_head=4, pad_on=0)
    assert at.selectbox(key="pad_layer").value == 2 and at.selectbox(key="pad_head").value == 3
    assert at.selectbox(key="causal_layer").value == 2 and at.selectbox(key="causal_head").value == 4
    assert at.toggle(key="pad_on").value is False
    at = run_app(view="Decoding", text=SENTENCE, dec_layer=1, dec_head=2, dec_step=2)
    assert at.selectbox(key="dec_layer").value == 1 and at.selectbox(key="dec_head").value == 2
    assert at.slider(key="dec_step").value == 2


def test_a_bad_value_in_a_link_falls_back_to_the_default(checkpoints):
    at = run_app(view="Nope", text=SENTENCE, layer="x", off="cross-9", pad_on="maybe")
    assert not at.exception
    assert at.sidebar.radio(key="view").value == "Overview"


@pytest.mark.parametrize("max_len", [0, 2])
@pytest.mark.parametrize("pad_on", [1, 0])
def test_masks_padding_demo_shows_the_sentence_own_greedy_translations(checkpoints, demo_translator, max_len, pad_on):
    """The page hands the header's greedy trace to the padding demonstration: its "Alone" line is the sentence's
    greedy translation with the session's length limit (the sidebar's, as everywhere on the page), and "In the
    padded batch" the model's own decoding of the padded batch under the same limit; the line says the limit."""
    at = run_app(view="Masks", text=SENTENCE, max_len=max_len, pad_on=pad_on)
    assert not at.exception
    line = next(m.value for m in at.markdown if m.value.startswith("Alone:")).replace("\\", "")
    # decodes alone by itself
    demo = demo_translator.padded_batch(SENTENCE, use_padding_mask=bool(pad_on), max_len=max_len or None)
    assert demo["alone"] == demo_translator.translate(SENTENCE, max_len=max_len or None).text
    said = ", at most 2 tokens as chosen in the sidebar" if max_len else ""
    assert line == f"Alone: **{demo['alone']}**  \nIn the padded batch: **{demo['padded']}**  \n(both greedy{said})"
    assert header(at) == demo["alone"]  # the header's translation, cut where the session cuts it
    if max_len:
        assert demo["alone"] != demo_translator.translate(SENTENCE).text


def allowed_probs(tr, log_probs):
    """(t, V) probabilities of what greedy decoding may write: <bos> and <pad> removed, the rest renormalised."""
    import numpy as np

    p = np.exp(log_probs.astype(np.float64))
    p[:, sorted({tr.tgt_vocab.bos_idx, tr.cfg.pad_idx})] = 0.0
    return p / p.sum(-1, keepdims=True)


@pytest.mark.parametrize("ckpt", ["demo", "demo:untrained"])
def test_masks_page_states_only_what_its_numbers_show(checkpoints, demo_translator, ckpt):
    import numpy as np

    at = run_app(view="Masks", text=SENTENCE, ckpt=ckpt)
    assert not at.exception
    text = visible_text(at).replace("\\", "")
    assert "This model was trained with the mask" not in text and "mostly get worse" not in text
    summary = next(c.value for c in at.caption if "Measured against" in c.value).replace("\\", "")
    m = re.search(r"fell at (\d+) of (\d+) positions and rose at (\d+)", summary)
    assert m, summary
    rows = md_tables(at)[-1]
    # recompute independently: the teacher-forced passes along the output shown, with and without the mask; an
    # output that stopped at the length limit has no <eos> to predict
    tr = demo_translator if ckpt == "demo" else demo_translator.untrained_twin(seed=0)
    out = tr.trace(SENTENCE)
    fed = out.raw_tokens if out.finished else out.raw_tokens[:-1]
    on, off = tr.teacher_forced(SENTENCE, fed, True), tr.teacher_forced(SENTENCE, fed, False)
    ids = tr.tgt_vocab.encode(out.raw_tokens) + ([tr.tgt_vocab.eos_idx] if out.finished else [])
    p_on = allowed_probs(tr, on.log_probs)[np.arange(len(ids)), ids]
    p_off = allowed_probs(tr, off.log_probs)[np.arange(len(ids)), ids]
    assert int(m.group(1)) == int((p_off < p_on).sum()) and int(m.group(2)) == len(rows) == len(ids)
    assert int(m.group(3)) == int((p_off > p_on).sum())
    assert "the model's own output" in summary  # no Multi30k reference for this sentence in the test data
    assert f"at {len(ids)} of {len(ids)} positions with the mask" in summary  # its own greedy output: 100 %


@pytest.mark.parametrize("ckpt, max_len", [("demo:untrained", 0), ("demo:untrained", 4), ("demo", 4)])
def test_masks_causal_table_of_an_output_cut_at_the_length_limit(checkpoints, demo_translator, ckpt, max_len):
    """An output that stopped at the length limit is measured as it is: no <eos> appended, only tokens decoding can
    write as the top, and the model's own greedy output is its top prediction at every position."""
    at = run_app(view="Masks", text=SENTENCE, ckpt=ckpt, max_len=max_len)
    assert not at.exception
    tr = demo_translator if ckpt == "demo" else demo_translator.untrained_twin(seed=0)
    out = tr.trace(SENTENCE, max_len=max_len or None)
    assert not out.finished  # the case under test
    rows = md_tables(at)[-1]
    assert [r["reference next"] for r in rows] == out.raw_tokens
    assert not {"<bos>", "<pad>"} & {r[c] for r in rows for c in ("top, mask on", "top, mask off")}
    summary = next(c.value for c in at.caption if "Measured against" in c.value).replace("\\", "")
    n = len(out.raw_tokens)
    assert f"at {n} of {n} positions with the mask" in summary and "length limit" in summary


def test_untrained_twin_never_writes_bos_and_the_page_says_what_it_does(checkpoints):
    at = run_app(view="Decoding", text=SENTENCE, ckpt="demo:untrained", max_len=12)
    assert not at.exception
    assert "<bos>" not in header(at)
    assert any("random weights" in i.value and "entropy" in i.value for i in at.info)


def test_a_long_table_scrolls_in_a_region_the_keyboard_reaches(checkpoints):
    """Decoding's table of all steps scrolls past ten rows: in a named region that Tab reaches, with every cell
    still escaped although the region itself is HTML."""
    at = run_app(view="Decoding", text=SENTENCE, ckpt="demo:untrained", max_len=14)
    assert not at.exception
    regions = [m.value for m in at.markdown if 'class="atlas-scroll"' in m.value]
    assert len(regions) == 1, regions
    assert 'tabindex="0"' in regions[0] and 'role="region"' in regions[0] and 'aria-label="all steps"' in regions[0]
    assert "<bos>" not in regions[0]  # the prefix cells' tokens stay text
    rows = md_tables(at)[-1]
    assert len(rows) > 10 and [r["step"] for r in rows] == [str(n) for n in range(1, len(rows) + 1)]
    assert rows[0]["prefix"] == "<bos>"


def test_inside_one_head_numbers_its_steps_without_gaps(checkpoints):
    for kind in ("cross", "dec_self", "enc_self"):
        at = run_app(view="Inside one head", text=SENTENCE, kind=kind)
        numbers = [int(m.value.split(" · ")[0].strip("*")) for m in at.markdown if re.match(r"\*\*\d+ · ", m.value)]
        assert numbers == list(range(1, len(numbers) + 1)), (kind, numbers)
        titles = " ".join(m.value for m in at.markdown)
        assert ("Mask:" in titles) == (kind == "dec_self"), kind


def test_heads_can_be_switched_off_in_several_layers_and_kinds(checkpoints):
    at = run_app(view="Attention", text=SENTENCE, off="enc_self-2-1,cross-1-2")
    assert not at.exception
    assert list(at.multiselect(key="off").value) == [("enc_self", 1, 0), ("cross", 0, 1)]
    said = " ".join(m.value for m in at.markdown)
    assert "encoder self L2 H1" in said and "cross L1 H2" in said
    assert any("all heads on" in c.value for c in at.caption)


@pytest.mark.parametrize("present", [0, 1])
def test_the_ablation_says_which_heatmaps_keep_all_heads_on_in_both_modes(checkpoints, present):
    """Presenter mode draws the heads-off part alone: no heatmap above it for a sentence to point to."""
    at = run_app(view="Attention", text=SENTENCE, off="cross-1-1", present=present, focus="heads off")
    assert not at.exception
    assert bool(at.get("plotly_chart")) is not bool(present)
    said = [c.value for c in at.caption if "all heads on" in c.value]
    assert said == ["The attention heatmaps on this page always show the model with all heads on."]


def test_validation_bleu_says_where_it_looked(checkpoints, monkeypatch, tmp_path):
    from model.analysis import experiments

    monkeypatch.setattr(experiments, "data_dir_candidates", lambda: [tmp_path / "a", tmp_path / "b"])
    at = run_app(view="Attention", text=SENTENCE, off="cross-1-1")
    at.button(key="ablate_bleu").click().run()
    warning = " ".join(w.value for w in at.warning).replace("\\", "")
    assert str(tmp_path / "a") in warning and str(tmp_path / "b") in warning and "ATLAS_DATA_DIR" in warning


def test_validation_bleu_has_a_noise_estimate(checkpoints, monkeypatch, tmp_path):
    write_split(tmp_path, "val", GERMAN, GERMAN)
    monkeypatch.setenv("ATLAS_DATA_DIR", str(tmp_path))
    at = run_app(view="Attention", text=SENTENCE, off="cross-1-1,cross-2-1")
    at.button(key="ablate_bleu").click().run()
    assert not at.exception
    said = captions(at).replace("\\", "")
    assert "95 % paired-bootstrap interval" in said and ("within noise" in said or "outside noise" in said)
    at.selectbox(key="layer").set_value(2).run()  # another layer: the measurement of these heads stays on screen
    assert not at.exception
    assert any("sacreBLEU" in m.label for m in at.metric)
    assert "95 % paired-bootstrap interval" in captions(at).replace("\\", "")


def test_english_input_gets_a_hint(checkpoints):
    at = run_app(view="Overview", text="A dog runs in the snow.")
    assert any("translates German into English" in i.value for i in at.info)
    at = run_app(view="Overview", text=SENTENCE)
    assert not any("translates German into English" in i.value for i in at.info)


def test_the_favicon_is_a_local_file():
    import ast
    from pathlib import Path

    src = (Path(__file__).resolve().parents[2] / "app.py").read_text(encoding="utf-8")
    call = next(n for n in ast.walk(ast.parse(src))
                if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "set_page_config")
    icon = next(k.value for k in call.keywords if k.arg == "page_icon")
    assert "favicon.png" in ast.unparse(icon)
    assert (Path(__file__).resolve().parents[2] / "docs" / "favicon.png").is_file()


def test_beam_search_runs_on_the_decoding_page_only_when_asked_for(checkpoints, demo_translator):
    """Beam search costs a third of a first visit of the page: it runs when the toggle (URL dec_beam)
    says so, or when the figures already trace it, and then shows what Translator.translate(beam) gives."""
    from views.parts.text import md_escape

    said = lambda at: " ".join(m.value for m in at.markdown)  # noqa: E731
    at = run_app(view="Decoding", text=SENTENCE, beam=3)
    assert not at.exception
    assert at.toggle(key="dec_beam").value is False and "**Beam search, beam 3**" not in said(at)
    expected = demo_translator.translate(SENTENCE, beam=3).text
    for query in (dict(dec_beam=1), dict(decoding="beam")):
        at = run_app(view="Decoding", text=SENTENCE, beam=3, **query)
        assert not at.exception
        assert "**Beam search, beam 3**" in said(at) and md_escape(expected) in said(at), query


def test_token_embeddings_alone_are_drawn_only_when_asked_for(checkpoints):
    titles = lambda at: [spec(c)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]  # noqa: E731
    at = run_app(view="Embeddings", text=SENTENCE)
    assert not at.exception and not any("token embeddings (before scaling)" in t for t in titles(at))
    at = run_app(view="Embeddings", text=SENTENCE, emb_alone=1)
    assert not at.exception and sum("token embeddings (before scaling)" in t for t in titles(at)) == 1


@pytest.mark.parametrize("ckpt", ["demo", "demo:untrained"])
def test_embeddings_call_only_a_trained_table_learned(checkpoints, ckpt):
    at = run_app(view="Embeddings", text=SENTENCE, ckpt=ckpt)
    assert not at.exception
    titles = [spec(c)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    said = visible_text(at) + " ".join(titles)
    twin = ckpt.endswith(":untrained")
    for phrase in ("row of a learned", "learned embeddings"):
        assert (phrase in said) != twin, phrase
    assert ("randomly initialised (untrained)" in said) == twin


@pytest.mark.parametrize("ckpt", ["demo", "demo:untrained"])
def test_training_header_promises_a_film_only_where_there_is_one(checkpoints, ckpt):
    at = run_app(view="Training", text=SENTENCE, ckpt=ckpt)  # the demo model was saved without a film
    assert not at.exception
    assert "The film below" not in captions(at) and "This model has no training film" in captions(at)


def test_training_header_names_the_film_of_a_model_that_has_one(monkeypatch):
    from views.pages import training
    from views.plumbing.state import ModelKey

    root = Path(__file__).resolve().parents[2] / "checkpoints"
    monkeypatch.setenv("ATLAS_CHECKPOINT_DIR", str(root))
    assert (root / "multi30k-de-en" / "film.json").is_file()
    assert not (root / "multi30k-de-en-words" / "film.json").exists()
    assert training.below(ModelKey("multi30k-de-en")).startswith("The film below is teacher-forced")
    for key in ("multi30k-de-en:untrained", "multi30k-de-en-words", "toy:copy:0000"):
        assert training.below(ModelKey.parse(key)).startswith("This model has no training film"), key


def test_a_toy_on_the_masks_page_is_batched_with_digits_and_measured_against_its_task(toy_key):
    at = run_app(view="Masks", text="3 1 4 1 5 9 2 6 5", ckpt=toy_key)
    assert not at.exception
    batched = next(c.value for c in at.caption if c.value.startswith("Batched with:"))
    partner = batched.removeprefix("Batched with: ").split(" · ")[0].replace("\\", "").split()
    assert partner[-1] == "&lt;eos&gt;" and len(partner) - 1 > 9 and all(t.isdigit() for t in partner[:-1])
    summary = next(c.value for c in at.caption if "Measured against" in c.value)
    assert "the right answer of the copy task" in summary


def test_a_toy_on_the_embeddings_page_shows_digits(toy_key):
    at = run_app(view="Embeddings", text="3 1 4", ckpt=toy_key)
    assert not at.exception
    said = visible_text(at).replace("\\", "")
    assert "all 10 digits the model knows" in said and "most frequent in the training data" not in said


def test_every_page_counts_the_source_tokens_the_model_reads(checkpoints, demo_translator):
    """One count of source tokens: what the encoder reads, <eos> included, in the header, the Overview's table,
    Positional encoding and Embeddings; and the vocabulary's size with the specials it counts, named."""
    src = demo_translator.prepare(SENTENCE)
    n, vocab = len(src.axis_tokens), demo_translator.src_vocab
    counted = f"{n} source tokens incl. `{src.eos_token}`"
    names = " ".join(f"`{vocab.itos[i]}`" for i in vocab.special_ids)
    k = len(vocab.special_ids)
    at = run_app(view="Overview", text=SENTENCE)
    assert not at.exception
    assert any(f" · {counted} · " in c.value for c in at.caption), captions(at)  # the header's caption
    rows = next(t for t in md_tables(at) if t and "known" in t[0])
    assert [r["token"] for r in rows] == src.axis_tokens and [int(r["id"]) for r in rows] == src.ids
    assert f"what the encoder reads: {counted}, which the model appends" in visible_text(at)
    cfg = demo_translator.cfg
    assert (f"vocabularies DE {cfg.src_vocab_size:,} / EN {cfg.tgt_vocab_size:,} tokens, each incl. its {k} "
            f"specials: {names}.") in captions(at)
    at = run_app(view="Positional encoding", text=SENTENCE)
    assert not at.exception
    assert f"this sentence's {n} positions (one per source token: {counted})" in captions(at)
    assert f"Your sentence's {counted} use positions 0–{n - 1}" in captions(at)
    at = run_app(view="Embeddings", text=SENTENCE)
    assert not at.exception
    assert f"One row per token the encoder reads: {counted}, as in the header." in captions(at)
    assert (f"where all {len(vocab) - k:,} words the model knows lie (the vocabulary's {len(vocab):,} entries less "
            f"its {k} specials: {names}, which are no words;") in captions(at)
