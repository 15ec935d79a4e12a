"""How the model read a sentence and what it wrote (model/text/reading.py): words read in fragments, a translation
caught in a loop, the token table's rows (viz/tables.py), the model card's limits (views/parts/reading.py), and both
on the
shipped models."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from model.text.reading import (
    MIN_TIMES,
    Repetition,
    describe_fragments,
    describe_repetition,
    fragmented_words,
    has_words,
    is_fragmented,
    misread,
    read_words,
    repeated_run,
    spelled,
)
from viz.tables import source_token_rows

ROOT = Path(__file__).resolve().parents[2]
# "Zwei Männr spielen Fussbal im Park." as the shipped model's pieces read it
TYPOS = ["▁Zwei", "▁M", "ä", "n", "n", "r", "▁spielen", "▁F", "uss", "b", "al", "▁im", "▁Park", "."]


# ------------------------------------------------------------------------------------ words and fragments

def test_pieces_are_grouped_into_words_and_punctuation_is_no_word():
    words = read_words(TYPOS, pieces=True)
    assert [w.text for w in words] == ["Zwei", "Männr", "spielen", "Fussbal", "im", "Park"]
    assert [(w.start, w.n_pieces) for w in words] == [(0, 1), (1, 5), (6, 1), (7, 4), (11, 1), (12, 1)]
    assert list(words[1].positions) == [1, 2, 3, 4, 5]
    # a bare "▁" starts a word spelled by the next piece; punctuation ends one, and a new word may follow it
    words = read_words(["▁", "Obama", "▁", "(", "rot", ")", "▁T", "-", "Shirt", "."], pieces=True)
    assert [(w.text, w.pieces) for w in words] == [("Obama", ("▁", "Obama")), ("rot", ("rot",)), ("T", ("▁T",)),
                                                  ("Shirt", ("Shirt",))]


def test_byte_pairs_end_their_words():
    """FSMT's pieces: a word runs up to the piece marked "</w>"; punctuation alone is no word."""
    pairs = ["Zwei</w>", "M", "ä", "n", "n", "r</w>", "spielen</w>", "F", "uss", "b", "al</w>", "im</w>", ".</w>"]
    words = read_words(pairs, pieces=True)
    assert [(w.text, w.start, w.n_pieces) for w in words] == [
        ("Zwei", 0, 1), ("Männr", 1, 5), ("spielen", 6, 1), ("Fussbal", 7, 4), ("im", 11, 1)]
    assert [w.text for w in fragmented_words(pairs, pieces=True)] == ["Männr", "Fussbal"]
    assert spelled(("Fuss", "bal</w>", "im</w>"), pieces=True) == "Fussbal im"


def test_a_word_model_reads_one_token_per_word():
    tokens = ["Zwei", "Männr", "spielen", "<unk>", "."]
    assert [(w.text, w.start, w.n_pieces) for w in read_words(tokens, pieces=False)] == [
        (t, k, 1) for k, t in enumerate(tokens)]
    assert fragmented_words(tokens, pieces=False) == []
    assert fragmented_words(TYPOS, pieces=False) == []  # the flag, not the look of the tokens, decides


def test_typos_names_and_numbers_are_fragmented_and_known_words_are_not():
    found = fragmented_words(TYPOS, pieces=True)
    assert [(w.text, w.n_pieces) for w in found] == [("Männr", 5), ("Fussbal", 4)]
    names = ["▁Angel", "a", "▁M", "er", "kel", "▁besucht", "▁2", "0", "2", "4", "▁W", "ol", "f", "s", "burg", "."]
    assert [(w.text, w.n_pieces) for w in fragmented_words(names, True)] == [
        ("Merkel", 3), ("2024", 4), ("Wolfsburg", 5)]


@pytest.mark.parametrize("pieces, fragmented", [
    (("▁Hund",), False),
    (("▁Spiel", "haus"), False),  # two pieces: a compound, or a word and its ending
    (("▁X", "y"), False),  # two single letters are still only two pieces
    (("▁Sonnen", "brillen", "etui"), False),  # three long pieces
    (("▁Trocken", "blumen", "sort", "iment"), False),  # four pieces of 4+ letters on average
    (("▁", "dreh", "en"), True),  # a bare "▁" is a piece of no letters: 6 letters in 3 pieces
    (("▁", "n", "amens"), True),  # "namens", as the shipped model reads it
    (("▁Mü", "n", "chen"), True),  # "München": 3 pieces, as "namens"
    (("▁", "Spiel", "haus"), False),  # 9 letters in 3 pieces
    (("▁M", "er", "kel"), True),  # three pieces of 2 letters on average
    (("▁", "Ha", "m", "burg"), True),  # 7 letters in 3 spelled pieces
    (("▁Schwarz", "en", "e", "gge", "r"), True),  # five pieces, however long
    (("▁", "X", "Y"), True),
])
def test_the_fragment_rule(pieces, fragmented):
    (word,) = read_words(list(pieces), pieces=True)
    assert is_fragmented(word) is fragmented


def test_the_rule_counts_the_pieces_the_line_shows():
    """A bare "▁" counts in the rule as in the line's "(3 pieces)": two words the line gives the same count of short
    pieces are both in it."""
    tokens = ["▁Ein", "▁Mann", "▁", "n", "amens", "▁Pe", "ter", "▁in", "▁Mü", "n", "chen", "."]
    found = fragmented_words(tokens, pieces=True)
    assert [(w.text, w.n_pieces) for w in found] == [("namens", 3), ("München", 3)]
    assert "namens (3 pieces), München (3 pieces)" in describe_fragments(found)
    assert [w.pieces for w in found] == [("▁", "n", "amens"), ("▁Mü", "n", "chen")]


@pytest.mark.parametrize("text, words", [
    ("?!.,", False), (" … — «» ", False), ("😀 ?", False), ("", False),
    ("Hund", True), ("2024", True), ("?! a", True), ("東京", True),
])
def test_a_text_of_punctuation_and_symbols_has_no_words(text, words):
    assert has_words(text) is words


def test_a_forced_token_the_vocabulary_lacks_is_said_with_what_the_model_received():
    assert misread(("▁zzzqqq",), ("<unk>",)) == [("▁zzzqqq", "<unk>")]
    # a many-to-many model forces its language token first: the given tokens are the last ones received
    assert misread(("▁A", "▁zzz", "▁dog"), ("eng_Latn", "▁A", "<unk>", "▁dog")) == [("▁zzz", "<unk>")]
    assert misread(("▁A",), ("▁A",)) == [] and misread((), ("eng_Latn",)) == []


def test_the_header_line_names_each_word_with_its_piece_count():
    line = describe_fragments(fragmented_words(TYPOS, True))
    assert "Männr (5 pieces), Fussbal (4 pieces)" in line
    assert "typo" in line and "name" in line and "number" in line
    assert describe_fragments([]) == ""


# ------------------------------------------------------------------------------------ repetition

def test_a_repeated_token_is_found_with_its_count_and_position():
    out = ["▁R", "ugby", "▁officer", "▁visit", "ing", "▁2", "▁201", "2", "▁guard", "▁guard", "▁guard", "▁guard", "."]
    assert repeated_run(out) == Repetition(("▁guard",), 4, 8)
    line = describe_repetition(repeated_run(out), pieces=True)
    assert "repeats “guard” 4 times in a row" in line and "lost track of the source" in line
    assert describe_repetition(None, True) == ""


def test_runs_of_two_and_three_tokens():
    assert repeated_run("a man a man a man .".split()) == Repetition(("a", "man"), 3, 0)
    assert repeated_run("x a b c a b c a b c y".split()) == Repetition(("a", "b", "c"), 3, 1)
    # four tokens a unit are not looked for
    assert repeated_run("a b c d a b c d a b c d".split()) is None


def test_the_longest_run_wins_and_a_tie_goes_to_the_shorter_unit_then_the_earlier():
    assert repeated_run("the the the dog dog dog dog .".split()) == Repetition(("dog",), 4, 3)
    # "guard" six times is also "guard guard" three times: the shorter unit
    assert repeated_run(["guard"] * 6) == Repetition(("guard",), 6, 0)
    assert repeated_run("a b a b a b a".split()) == Repetition(("a", "b"), 3, 0)


def test_twice_is_no_loop_and_a_clean_translation_has_none():
    assert MIN_TIMES == 3
    assert repeated_run("A dog is very very happy .".split()) is None
    assert repeated_run("Two men playing soccer in the park .".split()) is None
    assert repeated_run([]) is None


def test_a_unit_the_source_holds_as_often_is_a_copy_not_a_loop():
    assert repeated_run(list("3333"), source=list("3333")) is None  # a toy model copying digits
    assert repeated_run(list("1233"), source=list("3213")) is None
    assert repeated_run(list("3333"), source=list("33")) == Repetition(("3",), 4, 0)
    # another run is still found when the longest one is a copy
    assert repeated_run(list("3333xxx"), source=list("3333")) == Repetition(("x",), 3, 4)


def test_units_are_spelled_as_text():
    assert spelled(("▁R", "ugby"), pieces=True) == "Rugby"
    assert spelled(("▁a", "▁man"), pieces=True) == "a man"
    assert spelled(("▁",), pieces=True) == "▁"
    assert spelled(("a", "man"), pieces=False) == "a man"


# ------------------------------------------------------------------------------------ the token table and the card

def test_source_token_rows_mark_the_pieces_of_a_fragmented_word():
    spans = [(w.start, w.n_pieces, w.text) for w in fragmented_words(TYPOS, True)]
    unknown = [False] * len(TYPOS)
    unknown[-1] = True
    rows = source_token_rows(TYPOS, list(range(10, 10 + len(TYPOS))), unknown, spans)
    assert [r["position"] for r in rows] == list(range(len(TYPOS)))
    assert [r["token"] for r in rows] == TYPOS and rows[3]["id"] == 13
    known = [r["known"] for r in rows]
    assert known[1:6] == ["✓ piece, “Männr” in 5 pieces"] * 5
    assert known[7:11] == ["✓ piece, “Fussbal” in 4 pieces"] * 4
    assert known[0] == known[6] == known[11] == known[12] == "✓"
    assert known[13] == "unknown"
    assert [r["known"] for r in source_token_rows(["Hund", "Hnud"], [5, 0], [False, True])] == ["✓", "unknown"]


def test_the_card_limits_are_read_only_when_the_checkpoint_states_them():
    from views.parts.reading import card_limits

    assert card_limits({"limits": ["Domain: captions.", "", 3]}) == ["Domain: captions."]
    assert card_limits({}) == []
    assert card_limits({"note": "untrained: random weights, seed 0"}) == []
    assert card_limits({"limits": "not a list"}) == []
    assert card_limits({"imported": {"source": "Helsinki-NLP/opus-mt-de-en"}}) == []


# ------------------------------------------------------------------------------------ the shipped models

@pytest.fixture(scope="module")
def shipped():
    from model.inference.translator import Translator

    return Translator.from_checkpoint(ROOT / "checkpoints" / "multi30k-de-en")


@pytest.mark.checkpoint
def test_the_shipped_model_reads_the_typos_in_fragments(shipped):
    source = shipped.prepare("Zwei Männr spielen Fussbal im Park.")
    assert not any(source.unknown)  # SentencePiece: every piece is known, nothing says <unk>
    found = {w.text: w.n_pieces for w in fragmented_words(source.tokens, pieces=True)}
    assert found == {word: len(shipped.source_tokens(word)) for word in ("Männr", "Fussbal")}
    assert found["Männr"] >= 4 and found["Fussbal"] >= 4
    # spelled right, the same words are read whole
    assert fragmented_words(shipped.prepare("Zwei Männer spielen Fußball im Park.").tokens, pieces=True) == []


@pytest.mark.checkpoint
def test_the_shipped_model_reads_namens_and_muenchen_in_fragments_alike(shipped):
    source = shipped.prepare("Ein Mann namens Peter in München.")
    found = {w.text: w.n_pieces for w in fragmented_words(source.tokens, pieces=True)}
    assert found == {word: len(shipped.source_tokens(word)) for word in ("namens", "München")}
    assert shipped.source_tokens("namens")[0] == "▁"  # a bare mark first: a piece like the others


@pytest.mark.checkpoint
def test_the_shipped_model_loops_on_names_and_a_number(shipped):
    result = shipped.trace("Angela Merkel besucht 2024 Wolfsburg.")
    run = repeated_run(result.tokens, result.source.tokens)
    assert run is not None and run.times >= MIN_TIMES
    assert tuple(result.tokens[run.start: run.start + run.length]) == run.unit * run.times
    assert f"{run.times} times in a row" in describe_repetition(run, pieces=True)
    clean = shipped.trace("Ein Hund läuft im Schnee.")
    assert repeated_run(clean.tokens, clean.source.tokens) is None


@pytest.mark.checkpoint
@pytest.mark.parametrize("name", ["multi30k-de-en", "multi30k-de-en-words"])
def test_the_card_limits_in_metrics_json_hold_for_the_model(name):
    """Each example a shipped model's `limits` quotes (“German” gives “English”) is that model's greedy output, and
    the card's README says the same."""
    from model.inference.translator import Translator

    folder = ROOT / "checkpoints" / name
    limits = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))["limits"]
    assert limits[0].startswith("Domain: short, literal image descriptions (Multi30k")
    examples = re.findall(r"“([^”]+)” gives “([^”]+)”", " ".join(limits))
    assert examples
    tr = Translator.from_checkpoint(folder)
    card = " ".join((folder / "README.md").read_text(encoding="utf-8").split())
    for german, english in examples:
        assert tr.translate(german).text == english
        assert german in card and english in card
