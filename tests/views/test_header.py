"""Presenter mode's header: the whole translation on two lines at most, then its first words and how many were left
out; the source in what is left; the quiz's prefix never more than the step read."""
from __future__ import annotations

from dataclasses import replace

from views.parts.header import LINE_CHARS, Header, fit_line

SOURCE = "Zwei Hunde spielen im hohen Gras mit einem orangen Spielzeug ."
H = Header(src_tag="DE", tgt_tag="EN", source=SOURCE, output="Two dogs play in the tall grass with an orange toy.",
           prefixes=("Two", "Two dogs", "Two dogs play"), one_line=True)


def test_a_short_translation_is_whole_and_the_source_takes_the_rest_of_one_line():
    line = fit_line(replace(H, output="A dog."))
    assert line.output == "A dog." and line.lines == 1
    assert line.source.endswith(" …") and SOURCE.startswith(line.source[:-2])  # cut at a word
    assert len(line.source) + len(line.output) + 9 <= LINE_CHARS


def test_a_translation_that_needs_a_second_line_gets_it_whole():
    line = fit_line(H)
    assert line.output == H.output and line.lines == 2 and line.source == SOURCE


def test_a_long_translation_is_cut_at_a_word_and_says_how_many_words_were_left_out():
    words = [f"w{i}" for i in range(80)]
    line = fit_line(replace(H, output=" ".join(words)))
    shown, tail = line.output.split(" … (+")
    n_left = int(tail.split()[0])
    assert shown.split() == words[: len(words) - n_left] and n_left > 0 and line.lines == 2
    assert len(line.output) <= 2 * LINE_CHARS


def test_the_quiz_shows_the_prefix_the_step_read_never_the_answer():
    line = fit_line(H, secret_step=2)
    assert line.output == "Two dogs …" and "play" not in line.output
    assert fit_line(H, secret_step=1).output == "Two …"
