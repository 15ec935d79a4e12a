"""The app says how the model read the sentence and what it wrote: words read in fragments (with their piece
counts) above every page and in the Overview's token table, a translation that repeats itself, and what the model
card says of the model's limits (only where the checkpoint says it). On tiny models built here: a SentencePiece one
and the word-level demo; and on the shipped models."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
import torch

from model.text.reading import fragmented_words, repeated_run, spelled
from tests.app_support import demo_checkpoints, md_tables, run_app, serving, visible_text
from tests.tiny_checkpoint import ENGLISH, GERMAN

ROOT = Path(__file__).resolve().parents[2]
TYPO = "Ein Hnud läuft im Schnee."  # "Hund" misspelt: no piece spells it, no word vocabulary holds it
RIGHT = "Ein Hund läuft im Schnee."


def make_piece_checkpoint(folder: Path, seed: int = 0) -> Path:
    """A tiny SentencePiece model (BPE pieces trained on the four sentences, so that their words are whole pieces),
    with random weights: its output loops, which is what the repetition line is for."""
    from model.io.checkpoint import SRC_SPM, TGT_SPM, save_checkpoint
    from model.nn.config import ModelConfig
    from model.nn.transformer import EncoderDecoder
    from model.text.pieces import train_piece_model, vocab_of
    from model.text.tokenize import clean_text

    folder.mkdir(parents=True)
    spm = [train_piece_model([clean_text(s) for s in side], 150, "bpe") for side in (GERMAN, ENGLISH)]
    (folder / SRC_SPM).write_bytes(spm[0])
    (folder / TGT_SPM).write_bytes(spm[1])
    sv, tv = vocab_of(spm[0]), vocab_of(spm[1])
    cfg = ModelConfig(len(sv), len(tv), d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                      dropout=0.0, attn_dropout=0.0, max_len=128, tokenizer="sentencepiece")
    torch.manual_seed(seed)
    return save_checkpoint(folder, EncoderDecoder(cfg), sv, tv, {"note": "tiny piece model"})


@pytest.fixture(scope="module")
def root(tmp_path_factory, demo_folder):
    """A root of this module's own: `demo` and beside it `pieces`, the tiny SentencePiece model."""
    with demo_checkpoints(tmp_path_factory, "reading", demo_folder) as root:
        make_piece_checkpoint(root / "pieces")
        yield root


def shown(at) -> str:
    """The run's visible text with Markdown's escapes undone (user text is escaped before it is drawn)."""
    return html.unescape(re.sub(r"\\(.)", r"\1", visible_text(at)))


def tables(at) -> tuple[list[dict], list[dict]]:
    """The Overview's (source token rows, output token rows)."""
    found = md_tables(at)
    src = next(t for t in found if t and "known" in t[0])
    out = next(t for t in found if t and "shown as" in t[0])
    return src, out


def piece_count(root: Path, word: str) -> int:
    from model.inference.translator import Translator

    return len(Translator.from_checkpoint(root / "pieces").source_tokens(word))


def test_a_misspelt_word_is_flagged_with_its_piece_count_and_the_right_one_is_not(root):
    n = piece_count(root, "Hnud")
    assert n >= 3 and piece_count(root, "Hund") == 1
    at = run_app(view="Overview", text=TYPO, ckpt="pieces")
    assert not at.exception, [e.value for e in at.exception]
    text = shown(at)
    assert f"Read in fragments, not as whole words (often a typo, a name or a number): Hnud ({n} pieces)" in text
    assert "Unknown to the model" not in text  # SentencePiece: no <unk>
    src, _ = tables(at)
    marked = [r for r in src if r["known"] == f"✓ piece, “Hnud” in {n} pieces"]
    assert len(marked) == n and "".join(r["token"] for r in marked).lstrip("▁") == "Hnud"
    assert {r["known"] for r in src if r not in marked} == {"✓"}
    assert "the word as a whole is not" in text

    at = run_app(view="Overview", text=RIGHT, ckpt="pieces")
    assert not at.exception
    assert "Read in fragments" not in shown(at) and "the word as a whole is not" not in shown(at)
    assert {r["known"] for r in tables(at)[0]} == {"✓"}


def test_the_fragment_line_is_above_every_page(root):
    n = piece_count(root, "Hnud")
    for view in ("Positional encoding", "Decoding"):
        at = run_app(view=view, text=TYPO, ckpt="pieces")
        assert not at.exception
        assert any(f"Hnud ({n} pieces)" in shown_caption(c) for c in at.caption), view


def shown_caption(element) -> str:
    return html.unescape(re.sub(r"\\(.)", r"\1", str(element.value)))


@pytest.mark.parametrize("ckpt", ["pieces", "demo"])
def test_a_text_of_punctuation_only_is_said_to_have_no_words_and_the_pages_still_draw(root, ckpt):
    """The model still "translates" "?!.," (an invented caption): the header says the text has no words."""
    for view in ("Overview", "Attention"):
        at = run_app(view=view, text="?!.,", ckpt=ckpt)
        assert not at.exception, [e.value for e in at.exception]
        warned = [shown_caption(w) for w in at.warning]
        assert sum("has no words or numbers" in w and "invented" in w for w in warned) == 1, (view, warned)
        assert at.get("plotly_chart") or tables(at)[0], view  # the page is drawn, nothing is lost
    at = run_app(view="Overview", text=RIGHT, ckpt=ckpt)
    assert "has no words" not in shown(at)


def test_a_word_model_marks_unknown_words_and_reads_no_word_in_pieces(root):
    at = run_app(view="Overview", text=TYPO, ckpt="demo")
    assert not at.exception
    text = shown(at)
    assert "Unknown to the model (read as `<unk>`): Hnud" in text
    assert "Read in fragments" not in text
    src, _ = tables(at)
    assert [r["known"] for r in src if r["token"] == "Hnud"] == ["unknown"]
    assert {r["known"] for r in src if r["token"] != "Hnud"} == {"✓"}


def test_a_repeated_run_in_the_output_is_said_from_the_tokens_on_the_page(root):
    at = run_app(view="Overview", text=RIGHT, ckpt="pieces")
    assert not at.exception
    src, out = tables(at)
    run = repeated_run([r["shown as"] for r in out], [r["token"] for r in src])
    assert run is not None  # random weights: the output loops
    said = f"The translation repeats “{spelled(run.unit, True)}” {run.times} times in a row"
    captions = [shown_caption(c) for c in at.caption]
    assert sum(said in c for c in captions) == 2  # the header's line and the Overview's
    at = run_app(view="Embeddings", text=RIGHT, ckpt="pieces")
    assert any(said in shown_caption(c) for c in at.caption)  # the header's, on another page

    at = run_app(view="Overview", text=RIGHT, ckpt="demo")  # trained on this sentence: no loop
    src, out = tables(at)
    assert repeated_run([r["shown as"] for r in out], [r["token"] for r in src]) is None
    assert "The translation repeats" not in shown(at)


def test_no_card_limits_are_claimed_for_a_model_whose_checkpoint_states_none(root):
    for key in ("pieces", "demo", "demo:untrained"):
        at = run_app(view="Overview", text=RIGHT, ckpt=key)
        assert not at.exception
        assert "What the model card says" not in shown(at), key


@pytest.mark.checkpoint
def test_the_shipped_model_flags_typos_says_its_loop_and_shows_its_card():
    from model.inference.translator import Translator

    folder = ROOT / "checkpoints"
    tr = Translator.from_checkpoint(folder / "multi30k-de-en")
    limits = json.loads((folder / "multi30k-de-en" / "metrics.json").read_text(encoding="utf-8"))["limits"]
    with serving(folder, "multi30k-de-en"):
        at = run_app(view="Overview", text="Zwei Männr spielen Fussbal im Park.")
        assert not at.exception, [e.value for e in at.exception]
        text = shown(at)
        want = ", ".join(f"{w} ({len(tr.source_tokens(w))} pieces)" for w in ("Männr", "Fussbal"))
        assert f"(often a typo, a name or a number): {want}" in text
        assert "What the model card says" in text and all(line in text for line in limits)
        assert "names, numbers and misspelt words" in text.lower() and "garbled" in text

        at = run_app(view="Overview", text="Angela Merkel besucht 2024 Wolfsburg.")
        src, out = tables(at)
        run = repeated_run([r["shown as"] for r in out], [r["token"] for r in src])
        assert run is not None
        assert f"repeats “{spelled(run.unit, True)}” {run.times} times in a row" in shown(at)
        names = fragmented_words([r["token"] for r in src], pieces=True)
        assert {"Merkel", "2024", "Wolfsburg"} <= {w.text for w in names}

        at = run_app(view="Overview", text="Zwei Männr spielen Fussbal im Park.", ckpt="multi30k-de-en:untrained")
        assert "What the model card says" not in shown(at)  # the card is the trained model's
        at = run_app(view="Overview", text="Angela Merkel besucht 2024 Wolfsburg.", ckpt="multi30k-de-en-words")
        text = shown(at)
        unknown = [r["token"] for r in tables(at)[0] if r["known"] == "unknown"]
        assert unknown and f"Unknown to the model (read as `<unk>`): {', '.join(unknown)}" in text
        assert "Read in fragments" not in text and "What the model card says" in text and "<unk>" in text
