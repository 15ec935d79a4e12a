"""AppTest tests of presenter mode's quiz and the lecturer's note: the question comes without its answer, the reveal
gives the number the step's chart draws, a link restores question, order and reveal, and what is said holds for a
trained model, its untrained twin and a toy (the browser test clicks through it and reads the URL)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.app_support import array, run_app, url, visible_text
from tests.tiny_checkpoint import GERMAN
from viz.quiz import looks_at, next_word
from viz.text import fmt_prob

SENTENCE = GERMAN[3]  # "Ein Hund läuft im Schnee."
QUIZ = dict(view="Decoding", text=SENTENCE, present=1, focus="quiz")


def plain(s: str) -> str:
    """Markdown-escaped page text as the reader sees it (no escapes, no bold)."""
    return s.replace("\\", "").replace("**", "").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def guesses(at) -> list[str]:
    """The options of the room's guess (the radio that is neither the page's parts nor a sidebar control)."""
    radio = next(r for r in at.main.radio if r.key and r.key.startswith("quiz_pick_"))
    return [plain(o) for o in radio.options]


def candidates(step) -> tuple[list[str], list[float], int]:
    return list(step.top_tokens), list(step.top_probs), step.top_ids.index(step.chosen)


def test_the_question_shows_the_steps_candidates_shuffled_and_no_answer(checkpoints, demo_translator):
    at = run_app(dec_step=2, **QUIZ)
    assert not at.exception, [e.value for e in at.exception]
    step = demo_translator.trace(SENTENCE).steps[1]
    said = plain(visible_text(at))
    assert "Step 2 of" in said and "Which English word comes next?" in said
    assert " ".join(step.prefix_tokens) in said
    expected = next_word(*candidates(step), seed=1, step=2)
    assert guesses(at) == expected.options and sorted(guesses(at)) == sorted(step.top_tokens)
    assert not at.get("plotly_chart") and "Next:" not in said  # nothing that gives it away
    assert url(at)["quiz"] == "next" and "reveal" not in url(at)
    assert at.main.radio(key="focus").value == "quiz"


def test_reveal_gives_the_chosen_token_and_its_probability_as_the_candidates_chart_writes_it(checkpoints,
                                                                                             demo_translator):
    at = run_app(dec_step=2, **QUIZ)
    at.main.button(key="quiz_reveal").click().run()
    assert not at.exception
    step = demo_translator.trace(SENTENCE).steps[1]
    said = plain(visible_text(at))
    assert f"Next: {step.chosen_token} (p = {fmt_prob(step.chosen_prob)})" in said
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    chosen = step.top_ids.index(step.chosen)
    assert bars["text"][chosen] == fmt_prob(step.chosen_prob)  # the same number on the chart
    np.testing.assert_allclose(array(bars["x"])[chosen], step.chosen_prob, atol=1e-6)
    assert url(at)["reveal"] == "1"


def test_the_header_keeps_the_answer_until_reveal(checkpoints, demo_translator):
    """The header above the question shows the translation only up to the prefix the step read; Reveal gives the
    whole translation back."""
    res = demo_translator.trace(SENTENCE)
    assert len(res.steps) >= 3  # a translation past the asked step, to be kept from the room
    for kind in ("next", "looks"):
        at = run_app(dec_step=2, quiz=kind, **QUIZ)
        assert not at.exception, [e.value for e in at.exception]
        said = plain(visible_text(at))
        after = " ".join(res.steps[1].prefix_tokens[1:]) + " …"
        assert after in said  # the header: the prefix, then an ellipsis
        shown = [s.chosen_token for s in res.steps[1:]]  # what the step and every later one chose
        assert " ".join(shown[:2]) not in said and res.text not in said
        at.main.button(key="quiz_reveal").click().run()
        assert res.text in plain(visible_text(at))  # revealed: the whole translation is back in the header


def test_the_rooms_guess_is_checked_on_reveal(checkpoints, demo_translator):
    at = run_app(dec_step=1, **QUIZ)
    step = demo_translator.trace(SENTENCE).steps[0]
    radio = next(r for r in at.main.radio if r.key.startswith("quiz_pick_"))
    wrong = next(i for i, o in enumerate(guesses(at)) if o != step.chosen_token)
    radio.set_value(wrong).run()
    at.main.button(key="quiz_reveal").click().run()
    assert f"The room said {guesses_label(wrong, step)}: not this." in plain(visible_text(at))


def guesses_label(i: int, step) -> str:
    return next_word(*candidates(step), seed=1, step=1).options[i]


def test_a_link_restores_question_seed_and_reveal(checkpoints, demo_translator):
    step = demo_translator.trace(SENTENCE).steps[2]
    orders = {}
    for seed in (3, 4, 5, 6):
        at = run_app(dec_step=3, quiz="next", quiz_seed=seed, **{k: v for k, v in QUIZ.items() if k != "focus"})
        assert url(at)["quiz_seed"] == str(seed) and url(at)["focus"] == "quiz"
        orders[seed] = guesses(at)
        assert orders[seed] == next_word(*candidates(step), seed=seed, step=3).options
    assert len({tuple(o) for o in orders.values()}) > 1  # the seed is what orders them
    again = run_app(dec_step=3, quiz_seed=4, **QUIZ)
    assert guesses(again) == orders[4]
    shown = run_app(dec_step=3, quiz_seed=4, reveal=1, **QUIZ)
    assert f"Next: {step.chosen_token}" in plain(visible_text(shown))
    assert {k: url(shown)[k] for k in ("quiz_seed", "reveal", "dec_step")} == {"quiz_seed": "4", "reveal": "1",
                                                                               "dec_step": "3"}


def test_looks_at_answers_the_largest_weight_of_the_chosen_layer_and_head(checkpoints, demo_translator):
    res = demo_translator.trace(SENTENCE)
    src = res.source.axis_tokens
    for layer, head in ((1, 2), (2, 0)):
        at = run_app(dec_step=2, quiz="looks", reveal=1, dec_layer=layer, dec_head=head, **QUIZ)
        assert not at.exception
        cross = res.steps[1].cross[layer - 1]
        expected = looks_at(cross.mean(0) if head == 0 else cross[head - 1], src)
        said = plain(visible_text(at))
        assert f"Looked at most: {expected.options[expected.answer]} (weight {fmt_prob(expected.value)}" in said
        assert expected.tie_sentence() in said
        bars = json.loads(at.get("plotly_chart")[1].proto.spec)["data"][0]  # where the step looked, as drawn
        assert int(np.argmax(array(bars["y"]))) == expected.answer
    asked = run_app(dec_step=2, quiz="looks", **QUIZ)
    assert "Which German word will this step look at most?" in plain(visible_text(asked))
    assert guesses(asked) == looks_at(res.steps[1].cross[-1].mean(0), src).options  # the sentence, in order


def test_moving_the_step_asks_again_and_the_selector_turns_the_quiz_on_and_off(checkpoints):
    at = run_app(dec_step=2, reveal=1, **QUIZ)
    assert "Next:" in plain(visible_text(at))
    at.main.slider(key="dec_step").set_value(3).run()
    assert "Next:" not in plain(visible_text(at)) and "Step 3 of" in plain(visible_text(at))
    assert "reveal" not in url(at)
    at.main.selectbox(key="quiz").set_value("off").run()
    assert at.main.radio(key="focus").value == "this step" and "quiz" not in url(at)
    assert len(at.get("plotly_chart")) == 2  # the step's two charts, as before
    at.main.selectbox(key="quiz").set_value("looks").run()
    assert at.main.radio(key="focus").value == "quiz" and url(at)["quiz"] == "looks"


def test_the_quiz_is_presenter_modes_only(checkpoints):
    at = run_app(view="Decoding", text=SENTENCE, quiz="next", focus="quiz", dec_step=2)
    assert not at.exception
    assert "Which English word comes next?" not in plain(visible_text(at))
    assert len(at.get("plotly_chart")) >= 2  # the normal page: every part, the step's charts first


@pytest.mark.parametrize("which", ["twin", "toy"])
def test_the_quiz_holds_on_an_untrained_twin_and_a_toy(checkpoints, demo_translator, toy_key, which):
    from model import service
    from views.plumbing import state

    key, text = ("demo:untrained", SENTENCE) if which == "twin" else (toy_key, "3 1 4 1 5")
    model, error = state.load_model(state.ModelKey.parse(key))
    assert error is None
    steps = service.trace(model, text).steps
    n = min(2, len(steps))  # a random toy may stop after one step
    step = steps[n - 1]
    params = dict(QUIZ, ckpt=key, text=text, dec_step=n)
    asked = run_app(**params)
    assert not asked.exception, [e.value for e in asked.exception]
    noun = "English word" if which == "twin" else "output digit"
    assert f"Which {noun} comes next?" in plain(visible_text(asked))
    assert sorted(guesses(asked)) == sorted(step.top_tokens)
    shown = run_app(reveal=1, **params)
    said = plain(visible_text(shown))
    assert f"Next: {step.chosen_token} (p = {fmt_prob(step.chosen_prob)})" in said
    expected = next_word(*candidates(step), seed=1, step=n)
    assert expected.tie_sentence() in said  # an untrained model's near ties are said, from its numbers
    looks = run_app(reveal=1, quiz="looks", **params)
    q = looks_at(step.cross[-1].mean(0), model_source(model, text))
    assert f"Looked at most: {q.options[q.answer]} (weight {fmt_prob(q.value)}" in plain(visible_text(looks))


def model_source(model, text: str) -> list[str]:
    from model import service

    return service.trace(model, text).source.axis_tokens


def test_the_lecturers_note_is_pinned_in_presenter_mode_as_text(checkpoints):
    note = "Ask: <b>why</b> *Hund*? [link](http://x)"
    for view in ("Overview", "Decoding"):
        at = run_app(view=view, text=SENTENCE, present=1, note=note)
        assert not at.exception
        pinned = [m.value for m in at.main.markdown if "push_pin" in m.value]
        assert len(pinned) == 1 and "<b>" not in pinned[0] and "&lt;b&gt;" in pinned[0]
        assert plain(pinned[0]).endswith(note)
        assert at.sidebar.text_input(key="note").value == note and url(at)["note"] == note
    normal = run_app(view="Overview", text=SENTENCE, note=note)
    assert not [m for m in normal.main.markdown if "push_pin" in m.value]
    long = run_app(view="Overview", text=SENTENCE, present=1, note="word " * 100)
    assert len(url(long)["note"]) == 200
    at = run_app(view="Overview", text=SENTENCE, present=1)
    at.sidebar.text_input(key="note").set_value("Now: the encoder").run()
    assert url(at)["note"] == "Now: the encoder"
    assert any(plain(m.value).endswith("Now: the encoder") for m in at.main.markdown)
