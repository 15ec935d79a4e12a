"""The lesson file: `python -m model.export SENTENCE… --html FILE` writes one offline HTML page with the app's figures.

In process on the tiny checkpoint of tests/tiny_checkpoint.py, and once as a subprocess. The page's own
JavaScript is exercised in tests/browser/test_browser_lesson.py.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model import export as cli
from model.inference.translator import Translator
from model.io.lesson import lesson_data
from tests.tiny_checkpoint import GERMAN
from viz.attention import attention_figure
from viz.decoding import candidates_figure
from viz.figure_pack import FigurePack, apply, diff, figure_dict
from viz.kinds import KIND_NAMES, using_languages
from viz.layout import PAGE_WIDTH_PX
from viz.lesson import KINDS, formula_gap, lesson_pack, readable
from viz.lesson_page import page_data
from viz.text import escape_tokens

ROOT = Path(__file__).resolve().parents[2]
# Anything that would make a browser fetch a script, a style sheet or a font from elsewhere.
FETCHES = re.compile(r"<script[^>]*\bsrc\s*=|<link[^>]*\bhref\s*=|@import|url\(\s*['\"]?\s*(https?:)?//", re.I)


@pytest.fixture(scope="module")
def lesson(demo_folder):
    tr = Translator.from_checkpoint(demo_folder)
    return lesson_data(tr, [(tr.trace(s), None) for s in GERMAN[:2]], "demo")


def test_cli_writes_one_offline_page_with_every_sentence(demo_folder, tmp_path, capsys):
    from plotly.offline import get_plotlyjs

    out = tmp_path / "lesson.html"
    assert cli.main([GERMAN[0], GERMAN[3], "--checkpoint", str(demo_folder), "--html", str(out)]) == 0
    assert f"{out.stat().st_size:,} bytes" in capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert page.count(get_plotlyjs()) == 1  # Plotly's code inlined, once
    assert not FETCHES.findall(page)
    data = page_data(page)
    tr = Translator.from_checkpoint(demo_folder)
    assert [s["translation"] for s in data["sentences"]] == [tr.translate(GERMAN[0]).text, tr.translate(GERMAN[3]).text]
    assert [s["source"] for s in data["sentences"]] == [" ".join(tr.prepare(t).tokens) for t in (GERMAN[0], GERMAN[3])]


def test_every_kind_layer_head_and_step_is_in_the_page(lesson, tmp_path):
    page = cli.render_html(lesson, "in a test")
    data = page_data(page)
    names, pack = data["pack"]["names"], FigurePack.from_dict(data["pack"])
    for n, s in enumerate(lesson["sentences"]):
        meta = data["sentences"][n]
        for kind in KINDS:
            n_layers, n_heads = s["probs"][kind].shape[:2]
            assert meta["layers"][kind] == n_layers and meta["heads"] == n_heads
            assert f"s{n}/grid/{kind}" in names
            for layer in range(n_layers):
                assert f"s{n}/heads/{kind}/{layer}" in names
                for head in range(n_heads):
                    assert f"s{n}/head/{kind}/{layer}/{head}" in names
        for k, step in enumerate(s["steps"], 1):
            cand = pack.figure(f"s{n}/cand/{k}")
            assert cand["layout"]["yaxis"]["ticktext"] == escape_tokens(step["top_tokens"])
            assert cand["layout"]["title"]["text"].startswith(f"step {k}: next-token candidates")
            assert meta["steps"][k - 1]["chosen"] == step["chosen_token"]
            for layer in range(1, step["cross"].shape[0] + 1):
                for head in range(step["cross"].shape[1] + 1):
                    assert f"s{n}/cross/{k}/{layer}/{head}" in names
        for side in ("src", "tgt"):
            assert f"s{n}/stages/{side}" in names and f"s{n}/scaling/{side}" in names
    assert {"pe/waves", "pe/matrix", "pe/similarity/0"} <= set(names)


def test_every_figure_comes_back_exactly_as_stored(lesson):
    pack, _ = lesson_pack(lesson)
    for name, n in pack.names.items():
        assert pack.figure(name) == pack._figs[n], name
    read_back = FigurePack.from_dict(json.loads(json.dumps(pack.to_dict())))
    assert all(read_back.figure(name) == pack._figs[n] for name, n in pack.names.items())
    assert sum("fig" in e for e in pack.entries) < 20  # the rest are stored as differences


def test_the_figures_are_the_apps_own(lesson):
    """The one-head figure and a step's candidates, built here as the app's pages build them."""
    pack, _ = lesson_pack(lesson)
    s = lesson["sentences"][1]
    with using_languages("DE", "EN"):
        head = attention_figure(s["probs"]["dec_self"][1, 2], s["tgt_tokens"], s["tgt_tokens"], "dec_self",
                                mask=s["masks"]["dec_self"][1], width_px=PAGE_WIDTH_PX,
                                title=f"{KIND_NAMES['dec_self'].split(' (')[0]}, layer 2, head 3")
        step = s["steps"][1]
        cand = candidates_figure(step["top_tokens"], step["top_probs"], step["chosen"],
                                 title="step 2: next-token candidates")
    assert pack.figure("s1/head/dec_self/1/2") == figure_dict(head)
    assert pack.figure("s1/cand/2") == figure_dict(cand)
    assert any(t.get("name") == "masked" for t in figure_dict(head)["data"])  # the causal mask, as recorded


def test_diff_and_apply():
    a = {"data": [{"z": [1, 2], "name": "x"}], "layout": {"title": {"text": "a"}, "gone": 1}}
    b = {"data": [{"z": [1, 3], "name": "x"}], "layout": {"title": {"text": "b"}, "new": [1]}}
    ops = diff(a, b)
    assert [["layout", "gone"]] in ops and [["layout", "title", "text"], "b"] in ops
    assert apply(json.loads(json.dumps(a)), ops) == b
    assert diff(a, a) == []


def test_the_sentence_selector_reads_pieces_as_text():
    assert readable(["▁Ein", "▁Hund", "."]) == "Ein Hund." and readable(["Ein", "Hund", "."]) == "Ein Hund ."


def test_formula_gap():
    pe = np.zeros((5, 4), np.float32)
    assert formula_gap(pe, pe[:3] + 0.25) == 0.25 and formula_gap(pe, pe[:0]) == 0.0


def test_an_untrained_model_is_not_called_learned(lesson):
    page = cli.render_html({"model": dict(lesson["model"], trained=False), "sentences": lesson["sentences"][:1]}, "")
    data = page_data(page)
    assert "randomly initialised (untrained)" in data["emb_text"] and "untrained: random weights" in data["facts"]
    assert "learned" in page_data(cli.render_html(lesson, ""))["emb_text"]


def test_a_markup_token_stays_text(lesson):
    odd = dict(lesson["sentences"][0], translation="</script><script>alert(1)</script>")
    page = cli.render_html({"model": lesson["model"], "sentences": [odd]}, "")
    assert "<script>alert(1)" not in page
    assert page_data(page)["sentences"][0]["translation"] == odd["translation"]


@pytest.mark.parametrize("args, says", [
    (["   ", "--html", "{out}"], "the sentence has no words the tokenizer can read"),
    (["Ein Hund.", "   ", "--html", "{out}"], "sentence 2 has no words"),
    (["Ein Hund.", "Zwei Hunde."], "write several into a lesson file with --html"),
    (["Ein Hund.", "--html", "{tmp}/no/such/folder/x.html"], "does not exist"),
    (["Ein Hund.", "--html", "{out}", "--out", "{tmp}/t.json"], "give one of them"),
])
def test_bad_input_gets_a_clear_message_and_exit_code_2(demo_folder, tmp_path, capsys, args, says):
    args = [a.format(out=tmp_path / "x.html", tmp=tmp_path) for a in args] + ["--checkpoint", str(demo_folder)]
    try:
        code = cli.main(args)
    except SystemExit as e:  # argparse's own errors exit with 2 too
        code = e.code
    assert code == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_a_missing_checkpoint_says_so(tmp_path, capsys):
    assert cli.main(["Ein Hund.", "--checkpoint", str(tmp_path / "nope"), "--html", str(tmp_path / "x.html")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow  # two fresh interpreters import torch and Plotly
def test_the_command_line_as_a_subprocess(demo_folder, tmp_path):
    out = tmp_path / "lesson.html"
    run = subprocess.run([sys.executable, "-m", "model.export", GERMAN[1], GERMAN[2], "--checkpoint", str(demo_folder),
                          "--html", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert len(page_data(out.read_text(encoding="utf-8"))["sentences"]) == 2
    bad = subprocess.run([sys.executable, "-m", "model.export", "   ", "--checkpoint", str(demo_folder), "--html",
                          str(tmp_path / "y.html")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "error:" in bad.stderr and not (tmp_path / "y.html").exists()


def test_the_source_is_counted_as_the_app_counts_it(lesson):
    """The header's count is what the encoder reads, its end token included and named, as in the app's header
    (views/parts/counts.py): the sentence's tokens alone were one fewer than the axes the page draws."""
    _, metas = lesson_pack(lesson)
    for s, meta in zip(lesson["sentences"], metas):
        assert meta["n_source"] == len(s["src_tokens"]) == len(s["source_tokens"]) + 1
        assert meta["end"] == s["src_tokens"][-1] == "<eos>"
    from viz.lesson_page import PAGE_JS

    assert '" source tokens incl. " + s.end' in PAGE_JS  # the page's header writes both
