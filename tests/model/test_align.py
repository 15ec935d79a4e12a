"""Word alignment (model/analysis/align.py, python -m model.align): AER is Och & Ney's formula, talp lines are read
with their line named when bad, word pieces map to their words, and the command line refuses bad input with one
line and exit 2."""
from __future__ import annotations

import numpy as np
import pytest

from model.analysis.links import Pair, aer, links, matrix, read_talp


def test_aer_is_och_and_neys_formula():
    sure, possible = [{(0, 0), (1, 1)}], [{(0, 0), (1, 1), (2, 1)}]
    assert aer([{(0, 0), (1, 1)}], sure, possible) == pytest.approx(0.0)
    # A = {(0,0), (2,1), (2,2)}: |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 2 -> 1 - 3/5
    assert aer([{(0, 0), (2, 1), (2, 2)}], sure, possible) == pytest.approx(40.0)
    # summed over the corpus, not averaged per pair
    assert aer([{(0, 0)}, set()], [{(0, 0)}, {(1, 1)}], [{(0, 0)}, {(1, 1)}]) == pytest.approx(100 * (1 - 2 / 3))


def test_a_talp_line_is_one_based_sure_and_possible_and_bad_items_name_their_line():
    sure, possible = read_talp("1-1 2p3 3-2", 3, 3, "gold line 4")
    assert sure == {(0, 0), (2, 1)} and possible == {(0, 0), (1, 2), (2, 1)}
    with pytest.raises(ValueError, match="gold line 4: '2x3' is not a link"):
        read_talp("1-1 2x3", 3, 3, "gold line 4")
    with pytest.raises(ValueError, match="gold line 7: '4-1' is outside the pair"):
        read_talp("4-1", 3, 3, "gold line 7")


def test_pieces_link_their_words_and_the_end_token_is_never_linked():
    # source: word 0 = pieces 0, 1; word 1 = piece 2; position 3 is <eos>. Target: word 0 = pieces 0, 1; word 1 = 2.
    pair = Pair(["ab", "c"], ["x", "y"], [0, 0, 1, None], [0, 0, 1], 0, *[np.zeros(1)] * 4)
    m = np.array([[0.1, 0.6, 0.1, 0.2],   # row 0 predicts target piece 0: source piece 1 (word 0)
                  [0.0, 0.0, 0.3, 0.7],   # row 1: <eos> is largest, but belongs to no word -> piece 2 (word 1)
                  [0.1, 0.1, 0.5, 0.3],   # row 2 -> word 1
                  [0.9, 0.0, 0.0, 0.1]])  # row 3 reads target piece 2 (the shifted reading of it)
    assert links(pair, m) == {(0, 0), (1, 0), (1, 1)}
    assert links(pair, m, shift=True) == {(1, 0), (0, 1)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.tiny_checkpoint import make_tiny_checkpoint

    folder = tmp_path_factory.mktemp("align") / "demo"
    make_tiny_checkpoint(folder)
    return folder


def test_the_command_line_aligns_and_scores_and_refuses_bad_input(tiny, tmp_path, capsys):
    from model.align import main

    src, tgt, gold = tmp_path / "s.txt", tmp_path / "t.txt", tmp_path / "g.talp"
    src.write_text("Ein Hund läuft .\nZwei Männer sitzen .\n", encoding="utf-8")
    tgt.write_text("A dog runs .\nTwo men sit .\n", encoding="utf-8")
    gold.write_text("1-1 2-2 3-3 4-4\n1-1 2-2 3-3 4-4\n", encoding="utf-8")
    out = tmp_path / "links.txt"
    args = ["--checkpoint", str(tiny), "--src", str(src), "--tgt", str(tgt)]
    assert main(args + ["--gold", str(gold), "--out", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(all(len(x.split("-")) == 2 for x in line.split()) for line in lines)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("AER ")
    assert main(args + ["--gold", str(gold), "--sweep"]) == 0
    assert "| alti | predicting |" in capsys.readouterr().out
    for bad, message in ((["--method", "magic"], "unknown method 'magic'"),
                         (["--layer", "9"], "--layer must be mean or 1.."),
                         (["--gold", str(src)], "gold line 1: 'Ein' is not a link")):
        assert main(args + bad) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "Traceback" not in err and len(err.splitlines()) == 1
    tgt.write_text("A dog runs .\n", encoding="utf-8")
    assert main(args) == 2 and "different line counts: 2 source, 1 target" in capsys.readouterr().err
    tgt.write_text("A dog runs .\n\n", encoding="utf-8")
    assert main(args) == 2 and "--tgt line 2 is empty" in capsys.readouterr().err


def test_the_word_matrix_averages_a_words_rows_and_sums_its_columns():
    from model.analysis.links import word_matrix

    pair = Pair(["ab", "c"], ["x", "y"], [0, 0, 1, None], [0, 0, 1], 0, *[np.zeros(1)] * 4)
    m = np.array([[0.1, 0.6, 0.1, 0.2], [0.0, 0.0, 0.3, 0.7], [0.1, 0.1, 0.5, 0.3], [0.9, 0.0, 0.0, 0.1]])
    w = word_matrix(pair, m)  # target word 0 = rows 0, 1; word 1 = row 2; source word 0 = columns 0, 1
    np.testing.assert_allclose(w, [[(0.7 + 0.0) / 2, (0.1 + 0.3) / 2], [0.2, 0.5]])
    np.testing.assert_allclose(word_matrix(pair, m, shift=True), [[(0.0 + 0.2) / 2, (0.3 + 0.5) / 2], [0.9, 0.0]])


def test_an_aligner_is_named_by_its_aer_where_the_report_has_one():
    from model.analysis.measures import THRESHOLDS, head_roles

    limit = THRESHOLDS["aligner_aer"]
    assert "aligner" in head_roles({"aer": limit - 1}, "cross")
    # a head that agrees with the layer but aligns words badly against the gold links is no aligner
    assert "aligner" not in head_roles({"aer": limit + 1, "agreement": 0.9, "monotonicity": 0.9}, "cross")
    assert "aligner" in head_roles({"agreement": 0.9, "monotonicity": 0.9}, "cross")  # no gold: the older rule


def test_the_head_reports_alignment_is_each_cross_heads_aer(tiny):
    from model.analysis.align import annotated_set, head_alignment
    from model.inference.translator import Translator

    tr = Translator.from_checkpoint(tiny)
    found = head_alignment(tr)
    n_layers, n_heads = tr.cfg.n_decoder_layers, tr.cfg.n_heads
    assert found["aer"].shape == found["aer_value_norm"].shape == (n_layers, n_heads) and found["pairs"] == 100
    data = annotated_set(tr)
    one = aer([links(p, matrix(p, "attention", 0, 1)) for p in data.pairs], data.sure, data.possible)
    assert found["aer"][0, 1] == pytest.approx(one)
    assert len(found["layers"]["alti"]) == n_layers and all(0 <= v <= 100 for v in found["layers"]["alti"])


def test_a_pair_longer_than_the_model_reads_is_refused_naming_its_line(tiny, tmp_path, capsys):
    from model.align import main
    from model.inference.translator import Translator

    n = Translator.from_checkpoint(tiny).cfg.max_len
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("Ein Hund läuft .\nEin Hund läuft .\n", encoding="utf-8")
    tgt.write_text("A dog runs .\n" + "dog " * n + ".\n", encoding="utf-8")
    assert main(["--checkpoint", str(tiny), "--src", str(src), "--tgt", str(tgt)]) == 2
    err = capsys.readouterr().err
    assert "line 2: the target side has" in err and f"at most {n}" in err and "Traceback" not in err


def test_a_latin_1_source_file_is_read_as_latin_1(tiny, tmp_path, capsys):
    from model.align import main

    src, tgt, out = tmp_path / "s.txt", tmp_path / "t.txt", tmp_path / "links.txt"
    src.write_bytes("Zwei Männer grüßen .\n".encode("latin-1"))
    tgt.write_text("Two men greet .\n", encoding="utf-8")
    assert main(["--checkpoint", str(tiny), "--src", str(src), "--tgt", str(tgt), "--out", str(out)]) == 0
    assert "s.txt is not UTF-8: read as Latin-1" in capsys.readouterr().err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 1
